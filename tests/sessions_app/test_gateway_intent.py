"""The deterministic intent classifier: each authority class, and memory values verbatim from the operator."""

from __future__ import annotations

import pytest

from memory_app.policy import Category, derived_slot
from sessions_app.gateway_intent import IntentClass, classify


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hello Tess", IntentClass.CONVERSATION),
        ("what can you do?", IntentClass.CONVERSATION),
        ("what's the status?", IntentClass.STATUS),
        ("is it still running?", IntentClass.STATUS),
        ("please show me the progress", IntentClass.STATUS),
        ("run a health check", IntentClass.UNSUPPORTED),  # "run" is raw input, whatever follows
        ("diagnose the provider", IntentClass.DIAGNOSTICS),
        ("what are the capabilities here?", IntentClass.DIAGNOSTICS),
        ("remember that I lead with sev0", IntentClass.MEMORY),
        ("forget that I lead with sev0", IntentClass.MEMORY),
        ("correct my initiative to Phase 6", IntentClass.MEMORY),
        ("terminate this session", IntentClass.APPROVAL),
        ("please kill the session", IntentClass.APPROVAL),
        ("Tess, shut down the tmux session", IntentClass.APPROVAL),
        ("fix the flaky login test", IntentClass.HANDOFF),
        ("implement the export button", IntentClass.HANDOFF),
        ("can you review PR 42", IntentClass.HANDOFF),
        ("merge the release branch", IntentClass.HANDOFF),
        ("deploy to production", IntentClass.UNSUPPORTED),
        ("git push --force", IntentClass.UNSUPPORTED),
        ("delete the database", IntentClass.UNSUPPORTED),
        ("send keys C-c", IntentClass.UNSUPPORTED),
        ("post the summary to #customers", IntentClass.UNSUPPORTED),
        ("grant bob admin", IntentClass.UNSUPPORTED),
        ("restart the worker", IntentClass.UNSUPPORTED),
    ],
)
def test_it_routes_each_authority_class(text, expected):
    assert classify(text).cls is expected


def test_refusals_name_why():
    intent = classify("deploy to production")
    assert intent.reason == "gitops_write_unsupported"
    assert "approval" in intent.explanation


def test_a_preference_keeps_the_operators_words_verbatim():
    intent = classify("remember that I  lead with SEV0, always")
    assert intent.memory == {"op": "remember", "category": "preferences", "value": "I  lead with SEV0, always"}


def test_the_standing_initiative_is_recognised():
    intent = classify("remember my initiative is EVE_EVERYWHERE Phase 5, content round-trip")
    assert intent.memory == {
        "op": "remember",
        "category": "standing_initiative",
        "value": "EVE_EVERYWHERE Phase 5, content round-trip",
    }


def test_a_reference_becomes_a_pin():
    intent = classify("remember audit:42 is the outage we are tracking")
    assert intent.memory["category"] == "pinned_contexts"
    assert intent.memory["ref"] == "audit:42"
    assert intent.memory["value"] == "audit:42 is the outage we are tracking"


def test_forget_finds_the_slot_from_the_same_words():
    intent = classify("forget that I lead with sev0")
    assert intent.memory == {
        "op": "forget",
        "category": "preferences",
        "slot": derived_slot(Category.PREFERENCES, "I lead with sev0"),
    }


def test_forget_everything_is_forget_all():
    assert classify("forget everything").memory == {"op": "forget_all"}


def test_correct_a_preference_with_an_arrow():
    intent = classify("correct I lead with sev0 -> I lead with sev1")
    assert intent.memory == {
        "op": "correct",
        "category": "preferences",
        "slot": derived_slot(Category.PREFERENCES, "I lead with sev0"),
        "value": "I lead with sev1",
    }


def test_a_memory_request_without_content_is_refused_not_guessed():
    intent = classify("remember")
    assert intent.cls is IntentClass.UNSUPPORTED
    assert intent.reason == "memory_request_unclear"


def test_the_same_text_always_gives_the_same_class():
    assert {classify("fix the build").cls for _ in range(20)} == {IntentClass.HANDOFF}


@pytest.mark.parametrize(
    ("text", "action", "tool"),
    [
        ("create branch hotfix/1 in app", "gitops.create_branch", {"repo": "app", "branch": "hotfix/1"}),
        (
            "please cut a tag v1.2 in repo app from main",
            "gitops.create_tag",
            {"repo": "app", "tag": "v1.2", "from": "main"},
        ),
    ],
)
def test_creating_a_branch_or_tag_asks_for_the_catalogs_approval(text, action, tool):
    intent = classify(text)
    assert (intent.cls, intent.action, intent.tool) == (IntentClass.APPROVAL, action, tool)


def test_pushing_and_bare_tagging_stay_refused():
    for text in ("git push origin main", "tag v1", "release 2.0"):
        assert classify(text).reason == "gitops_write_unsupported"
