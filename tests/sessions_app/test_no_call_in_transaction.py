"""Every path that calls a provider, a model or another service does it with no transaction open: catalog
tools (an MCP server, provider health), turns on a real tmux runtime with plast-mem as operator memory, a Mos
hand-off's dispatch, a plast-mem capture and a message sent into tmux (tests/outside_transaction.py)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from approvals_app.handoffs import handoff_dispatch, handoff_result_apply
from approvals_app.models import Handoff
from memory_app.plugin.registry import reset_plugins
from sessions_app import services
from sessions_app.models import AttachMode, ConversationSummary, InboxItem, Session
from tests.approvals_app.test_handoffs import running_receiver
from tests.conftest import scope_of
from tests.memory_app.plastmem_standin import PlastMemStandIn
from tests.outside_transaction import no_call_in_transaction
from tests.providers_app.chat_standin import running_chat_standin
from tests.sessions_app.conftest import pump_until
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

MCP_SERVER = Path(__file__).parents[1] / "providers_app" / "mcp_server.py"


def post(client, path: str, body: dict[str, Any]) -> Any:
    return client.post(path, body, format="json", headers={"Idempotency-Key": uuid.uuid4().hex})


@pytest.fixture
def plastmem() -> Iterator[PlastMemStandIn]:
    server = PlastMemStandIn().start()
    plugin = {"active": "default", "instances": {"default": {"kind": "plastmem", "url": server.url}}}
    reset_plugins()
    with override_settings(TESS_MEMORY_PLUGIN=plugin):
        yield server
    reset_plugins()
    server.stop()


def test_catalog_tools_ask_an_mcp_server_and_the_providers_with_no_transaction_open(cast, api_as, settings, tmux):
    settings.TESS_MCP_SERVERS = {"local": {"argv": [sys.executable, str(MCP_SERVER)], "tenants": None}}
    settings.TESS_MCP_TIMEOUT_SECONDS = 20
    client = api_as(cast.owner)
    with no_call_in_transaction():
        found = post(client, "/api/v1/catalog/mcp.discover/invoke/", {"input": {"server": "local"}})
        health = post(client, "/api/v1/catalog/diagnostics.provider_health/invoke/", {"input": {}})
    assert found.status_code == 200, found.json()
    assert [tool["name"] for tool in found.json()["result"]["tools"]] == ["add"]
    assert health.status_code == 200, health.json()


def test_status_and_diagnostics_turns_ask_tmux_plast_mem_and_the_model_with_no_transaction_open(
    cast, api_as, start_session, plastmem
):
    session = start_session()
    client = api_as(cast.owner)
    with running_chat_standin() as standin, no_call_in_transaction():
        settings = {
            "TESS_MODEL_ADAPTER": "openai_compatible",
            "TESS_MODEL": "gpt-5.6-sol",
            "TESS_MODEL_BASE_URL": standin.base_url,
            "TESS_MODEL_API_KEY": "sk-test",
        }
        with override_settings(**settings):
            for text in ("what's the status?", "diagnose the provider"):
                response = post(client, f"/api/v1/sessions/{session.pk}/turns/", {"text": text})
                assert response.status_code == 200, response.json()
                assert response.json()["reply"].startswith("stand-in answer to:")
    assert plastmem.state.requests, "the first turn read its startup context from plast-mem"


def test_a_handoff_is_dispatched_to_mos_and_its_result_captured_in_plast_mem_with_no_transaction_open(
    cast, api_as, start_session, settings, plastmem
):
    session = start_session()
    with running_receiver(settings) as mos, no_call_in_transaction():
        turn = post(api_as(cast.owner), f"/api/v1/sessions/{session.pk}/turns/", {"text": "fix the flaky login test"})
        assert turn.status_code == 200, turn.json()
        handoff = Handoff.objects.get()
        # Dispatched once the turn committed (the task runs in-process here); a repeat finds nothing to do.
        assert wait_for(lambda: len(mos.received) == 1)
        assert handoff_dispatch(handoff_id=handoff.pk, worker="worker-1") is False
        handoff_result_apply(handoff_id=handoff.pk, status="completed", result={"summary": "fixed"}, via="test")
    assert wait_for(lambda: plastmem.requests_to("add_message"))


def test_a_message_is_sent_into_tmux_with_no_transaction_open(cast, api_as, start_session, tmux):
    session: Session = start_session()
    scope = scope_of(cast.owner, cast.acme)
    services.session_attach(scope=scope, session_id=session.pk, mode=AttachMode.INTERACTIVE)
    with no_call_in_transaction():
        # Delivered once the enqueue committed (the task runs in-process here), by send-keys into tmux.
        response = post(api_as(cast.owner), f"/api/v1/sessions/{session.pk}/messages/", {"text": "hello tmux"})
        assert response.status_code == 202, response.json()
        assert wait_for(lambda: InboxItem.objects.get(pk=response.json()["inbox_id"]).delivered_seq is not None)
    pump_until(session, "got:hello tmux")


def test_starting_attaching_and_detaching_ask_tmux_with_no_transaction_open(cast, api_as, tmux):
    client = api_as(cast.owner)
    with no_call_in_transaction():
        started = post(client, "/api/v1/sessions/", {"provider": "alpha", "title": "work"})
        assert started.status_code == 201, started.json()
        session = started.json()["id"]
        attached = post(client, f"/api/v1/sessions/{session}/attach/", {"mode": "interactive"})
        assert attached.status_code == 200, attached.json()
        detached = post(client, f"/api/v1/sessions/{session}/detach/", {})
        assert detached.status_code == 200 and detached.json() == {"detached": 1}
    assert Session.objects.get(pk=session).runtime_id in tmux.tmux("list-sessions", "-F", "#{session_id}")


def test_a_conversation_summary_asks_the_model_with_no_transaction_open(cast, api_as):
    session = Session.objects.create(
        tenant=cast.acme, owner=cast.owner, title="talk", provider_instance="nowhere", runtime_id="$1"
    )
    client = api_as(cast.owner)
    with running_chat_standin() as standin:
        settings = {
            "TESS_MODEL_ADAPTER": "openai_compatible",
            "TESS_MODEL": "gpt-5.6-sol",
            "TESS_MODEL_BASE_URL": standin.base_url,
            "TESS_MODEL_API_KEY": "sk-test",
            "TESS_CONVERSATION_TOKENS": 1024,
        }
        with override_settings(**settings):
            for n in range(20):
                post(client, f"/api/v1/sessions/{session.pk}/turns/", {"text": f"question {n} " + "about it " * 8})
            before = ConversationSummary.objects.filter(session=session).count()
            with no_call_in_transaction():
                for n in range(20):
                    text = f"more {n} " + "about it " * 8
                    response = post(client, f"/api/v1/sessions/{session.pk}/turns/", {"text": text})
                    assert response.status_code == 200, response.json()
    assert ConversationSummary.objects.filter(session=session).count() > before
