"""The Memory disclosure page (seed 002), server-rendered inside the admin.

Every action on it (correct, reauthorize, delete one, delete all) parks a card and shows it for an
explicit confirmation; the result shown is the server's, read back from the decided card.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_POST

from approvals_app.card_selectors import card_get, cards_visible
from approvals_app.cards import Unavailable, card_confirm, card_dismiss
from tess_site.accounts.scopes import scope_for_page
from tess_site.errors import TessError
from tess_site.scope import Scope

from .errors import MemoryUnavailable
from .policy import Category
from .selectors import ERASURE, PROMPT_CEILINGS, category_policy_view, is_active, memory_snapshot
from .services import CARD_KIND, memory_propose

PROPOSAL_FIELDS = ("op", "category", "slot", "value", "ref")

# What each category is for, in the words the page uses (how long a note lasts comes from the policy).
CATEGORY_WORDS = {
    Category.PREFERENCES.value: (
        "Preferences",
        "How you like Tess to work with you, for example \u201clead with the severity\u201d.",
    ),
    Category.STANDING_INITIATIVE.value: (
        "Current focus",
        "The one thing you are working towards right now; Tess keeps it in mind in every conversation.",
    ),
    Category.PINNED_CONTEXTS.value: (
        "Pinned items",
        "A session, approval, hand-off or audit entry you want Tess to keep in mind. A pin is left out as "
        "soon as you can no longer open what it points to.",
    ),
}


def card_sentence(payload: dict[str, Any]) -> str:
    """What confirming a memory card will do, in words."""
    name = CATEGORY_WORDS.get(str(payload.get("category", "")), ("notes", ""))[0].lower()
    op = payload.get("op")
    if op == "remember":
        return f"Remember a new note in {name}."
    if op == "correct":
        return f"Change your note in {name} to the text below; the old text is kept as a superseded revision."
    if op == "reauthorize":
        return f"Renew your note in {name}: it is used again from now, unchanged."
    if op == "forget":
        return f"Delete your note in {name}, with every superseded revision of it."
    if op == "forget_all":
        return "Delete every note you have, current and superseded."
    return "Change your memory."


def result_sentence(result: dict[str, Any]) -> str:
    """The server's outcome of a decided card, in words (the outcome code stays on the element)."""
    outcome = str(result.get("outcome", ""))
    if outcome == "deleted":
        count = int(result.get("deleted_count") or 0)
        sentence = ngettext("Deleted %(n)d note.", "Deleted %(n)d notes, superseded revisions counted.", count) % {
            "n": count
        }
        redacted = int(result.get("redacted_count") or 0)
        if redacted:
            sentence += " " + ngettext(
                "%(n)d message in your sessions was redacted.",
                "%(n)d messages in your sessions were redacted.",
                redacted,
            ) % {"n": redacted}
        return sentence
    return {
        "created": "Remembered.",
        "revised": "Changed; the earlier text is kept as a superseded revision.",
        "reauthorized": "Renewed: the note is used again from now.",
        "dismissed": "Dismissed: nothing changed.",
    }.get(outcome, "Not done." if result.get("error") else outcome.replace("_", " ").capitalize() + ".")


def category_sections(categories: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The page's sections: each category in words, how many notes it holds and for how long, its notes."""
    sections = []
    for policy in categories:
        name, purpose = CATEGORY_WORDS[policy["category"]]
        ceiling, days = policy["ceiling"], policy["retention_days"]
        if ceiling == 1:
            lasts = (
                ngettext(
                    "One note, used for %(n)d day after you last confirm it.",
                    "One note, used for %(n)d days after you last confirm it.",
                    days,
                )
                if days
                else "One note, kept until you delete it."
            )
        elif days:
            lasts = ngettext(
                "Up to %(c)d notes; each is used for %(n)d day after you last confirm it.",
                "Up to %(c)d notes; each is used for %(n)d days after you last confirm it.",
                days,
            )
        else:
            lasts = "Up to %(c)d notes, kept until you delete them."
        lasts = lasts % {"c": ceiling, "n": days or 0}
        sections.append(
            {
                "key": policy["category"],
                "name": name,
                "purpose": purpose,
                "lasts": lasts,
                "retention_days": days,
                "notes": [item for item in rows if item["row"].category == policy["category"]],
            }
        )
    return sections


def _page(request: HttpRequest, template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
    base = {**admin.site.each_context(request), "title": "Your memory"}
    response = render(request, template, {**base, **context}, status=status)
    if isinstance(context.get("error"), Unavailable):
        response["Retry-After"] = str(context["error"].retry_after_seconds)
    return response


def _not_a_member(request: HttpRequest) -> HttpResponse:
    return _page(request, "memory/not_member.html", {}, status=403)


def _disclosure(
    request: HttpRequest, scope: Scope, *, error: TessError | None = None, status: int = 200
) -> HttpResponse:
    try:
        snapshot = memory_snapshot(scope=scope)
        pending = list(cards_visible(scope=scope, status="pending", kind=CARD_KIND)[:20])
    except MemoryUnavailable as exc:
        return _page(request, "memory/unavailable.html", {"error": exc}, status=exc.status_code)
    history_by_memory: dict[str, list[Any]] = {}
    for old in snapshot.history:
        history_by_memory.setdefault(str(old.memory_id), []).append(old)
    rows = [
        {"row": row, "active": is_active(row, snapshot.now), "history": history_by_memory.get(str(row.memory_id), [])}
        for row in snapshot.rows
    ]
    categories = category_policy_view()
    context = {
        "snapshot": snapshot,
        "rows": rows,
        "sections": category_sections(categories, rows),
        "category_names": {key: words[0] for key, words in CATEGORY_WORDS.items()},
        "history": snapshot.history,
        "categories": categories,
        "prompt_ceilings": PROMPT_CEILINGS,
        "erasure": ERASURE,
        "pending": [{"card": card, "sentence": card_sentence(card.payload)} for card in pending],
        "category_choices": [c.value for c in Category],
        "error": error,
    }
    return _page(request, "memory/disclosure.html", context, status=status)


@require_GET
def disclosure(request: HttpRequest) -> HttpResponse:
    scope = scope_for_page(request)
    if scope is None:
        return _not_a_member(request)
    return _disclosure(request, scope)


@require_POST
def propose(request: HttpRequest) -> HttpResponse:
    scope = scope_for_page(request)
    if scope is None:
        return _not_a_member(request)
    data = {key: request.POST[key] for key in PROPOSAL_FIELDS if request.POST.get(key)}
    try:
        card = memory_propose(scope, data=data)
    except TessError as exc:
        return _disclosure(request, scope, error=exc, status=exc.status_code)
    return redirect("memory:card", card_id=card.id)


@require_GET
def card_page(request: HttpRequest, card_id: UUID) -> HttpResponse:
    scope = scope_for_page(request)
    if scope is None:
        return _not_a_member(request)
    try:
        card = card_get(scope=scope, card_id=card_id)
    except TessError as exc:
        return _page(request, "memory/card.html", {"error": exc}, status=exc.status_code)
    return _card_page(request, card, card.outcome)


def _decide(request: HttpRequest, card_id: UUID, *, confirm: bool) -> HttpResponse:
    scope = scope_for_page(request)
    if scope is None:
        return _not_a_member(request)
    try:
        if confirm:
            card, result = card_confirm(scope=scope, card_id=card_id)
        else:
            card, result = card_dismiss(scope=scope, card_id=card_id), {"outcome": "dismissed"}
    except TessError as exc:
        return _page(request, "memory/card.html", {"error": exc}, status=exc.status_code)
    return _card_page(request, card, result)


def _card_page(request: HttpRequest, card: Any, result: dict[str, Any] | None) -> HttpResponse:
    context = {
        "card": card,
        "result": result,
        "sentence": card_sentence(card.payload),
        "result_sentence": result_sentence(result or {}),
        "category_name": CATEGORY_WORDS.get(str(card.payload.get("category", "")), ("", ""))[0],
    }
    return _page(request, "memory/card.html", context)


@require_POST
def confirm(request: HttpRequest, card_id: UUID) -> HttpResponse:
    return _decide(request, card_id, confirm=True)


@require_POST
def dismiss(request: HttpRequest, card_id: UUID) -> HttpResponse:
    return _decide(request, card_id, confirm=False)
