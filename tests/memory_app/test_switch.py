"""The two kill switches: TESS_OPERATOR_MEMORY in the environment and the runtime switch in the database."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from memory_app.models import MemorySwitch
from memory_app.switch import memory_scope_for
from tess_site.settings.derived import operator_memory
from tess_site.settings.env import ImproperlyConfiguredEnv
from tests.conftest import csrf_token, scope_of


@pytest.mark.parametrize(("raw", "value"), [("0", False), ("off", False), ("false", False), ("on", True)])
def test_the_environment_switch_reads_on_and_off(raw, value):
    assert operator_memory({"TESS_OPERATOR_MEMORY": raw}) is value


def test_an_environment_value_that_is_neither_on_nor_off_stops_start_up():
    with pytest.raises(ImproperlyConfiguredEnv, match="TESS_OPERATOR_MEMORY='maybe' is neither true"):
        operator_memory({"TESS_OPERATOR_MEMORY": "maybe"})


def test_unset_means_on():
    assert operator_memory({}) is True


def test_the_switch_command_turns_memory_off_and_on_for_every_operator(cast, capsys):
    owner, teammate = scope_of(cast.owner, cast.acme), scope_of(cast.teammate, cast.acme)

    call_command("tess_memory_switch", "off")
    off = (memory_scope_for(owner), memory_scope_for(teammate))
    call_command("tess_memory_switch", "on")

    assert off == ("session", "session")
    assert memory_scope_for(owner) == "profile"
    assert "operator memory: on" in capsys.readouterr().out.splitlines()[-1]


def test_a_superuser_flips_the_switch_in_the_admin(cast, browser_as):
    cast.admin_user.is_superuser = True
    cast.admin_user.save()
    client = browser_as(cast.admin_user)
    token = csrf_token(client)

    response = client.post("/admin/memory_app/memoryswitch/add/", {"csrfmiddlewaretoken": token})

    assert response.status_code == 302
    switch = MemorySwitch.objects.get()
    assert switch.enabled is False and switch.changed_by == "admin:admin_user"
    assert memory_scope_for(scope_of(cast.owner, cast.acme)) == "session"


def test_only_superusers_see_the_switch_in_the_admin(cast, browser_as):
    assert browser_as(cast.admin_user).get("/admin/memory_app/memoryswitch/").status_code == 403
