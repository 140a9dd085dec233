"""``tess inbox`` (and ``--watch``), ``tess approvals open|resend`` and ``tess cards`` against a live server."""

from __future__ import annotations

import json
import re

import pytest

from approvals_app.approvals import token_hash
from approvals_app.cards import card_propose
from approvals_app.models import Approval, ApprovalLink, Card
from tests.cli.conftest import Tess
from tests.conftest import scope_of
from tests.factories import SessionFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

LINK = re.compile(r"^http://[^/]+/approvals/([A-Za-z0-9_-]{20,})/$")


def another(tess: Tess, name: str, username: str) -> Tess:
    other = Tess(home=tess.home.parent / name, url=tess.url)
    other.login(username)
    return other


def test_an_approver_watches_a_request_arrive_mints_their_link_and_others_cannot(cast, tess):
    session = SessionFactory.create(owner=cast.owner, tenant=cast.acme)
    tess.login("owner")
    approver = another(tess, "approver", "approver")
    watching = approver.popen("inbox", "--watch", "--json", "--max-updates", "2")
    try:
        assert watching.stdout is not None
        assert json.loads(watching.stdout.readline()) == []  # the snapshot: nothing yet
        assert tess("terminate", str(session.pk)).returncode == 0
        arrived = json.loads(watching.stdout.readline())  # pushed, not polled
        watching.wait(timeout=30)
    finally:
        watching.kill()
    approval = Approval.objects.get(session_id=session.pk)
    assert [(item["kind"], item["id"]) for item in arrived] == [("approval_to_decide", str(approval.pk))]
    assert watching.returncode == 0

    listed = approver("inbox")
    assert listed.returncode == 0 and "approval_to_decide" in listed.stdout and str(approval.pk) in listed.stdout
    assert "Nothing is waiting on you." in another(tess, "teammate", "teammate")("inbox").stdout

    opened = approver("approvals", "open", str(approval.pk))
    assert opened.returncode == 0, opened.stderr
    token = LINK.match(opened.stdout.strip())
    assert token is not None
    assert ApprovalLink.objects.get(approval=approval, approver=cast.approver).token_hash == token_hash(token[1])

    for who in (tess, another(tess, "teammate2", "teammate")):  # the requester, a colleague: not theirs to decide
        refused = who("approvals", "open", str(approval.pk))
        assert refused.returncode == 4 and "HTTP 404" in refused.stderr and "/approvals/" not in refused.stdout

    resent = tess("approvals", "resend", str(approval.pk))
    assert resent.returncode == 0 and "1 approver" in resent.stdout
    assert ApprovalLink.objects.get(approval=approval, approver=cast.approver).token_hash != token_hash(token[1])
    assert approver("approvals", "resend", str(approval.pk)).returncode == 4


def test_cards_are_dismissed_from_the_cli_and_only_their_owner_may(cast, tess):
    card = card_propose(
        scope=scope_of(cast.owner, cast.acme),
        kind="memory",
        payload={"op": "remember", "category": "preference", "slot": "editor", "value": "vim"},
    )
    tess.login("owner")
    assert str(card.pk) in tess("inbox").stdout
    teammate = another(tess, "teammate", "teammate")
    assert teammate("cards", "dismiss", str(card.pk)).returncode == 4
    assert teammate("cards", "confirm", str(card.pk)).returncode == 4
    done = tess("cards", "dismiss", str(card.pk))
    assert done.returncode == 0, done.stderr
    assert Card.objects.get(pk=card.pk).status == "dismissed"
    again = tess("cards", "confirm", str(card.pk))
    assert again.returncode == 5 and "card_already_decided" in again.stderr
    assert "Nothing is waiting on you." in tess("inbox").stdout


def test_ids_are_required(cast, tess):
    assert tess("approvals", "open").returncode == 2
    assert tess("cards", "confirm").returncode == 2
