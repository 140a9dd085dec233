"""Outbound calls to Discord's API: interaction follow-ups, channel notices, direct messages.

The API base is ``TESS_DISCORD_API_BASE`` (a local stand-in in tests). A link to an approval only ever goes
out as a direct message to its own approver; a bound channel gets the notice without it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from django.conf import settings

from sessions_app.models import IngressBinding, IngressChannel
from tess_site.accounts.models import ExternalIdentity

from .models import DiscordInteraction

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from approvals_app.models import Approval

logger = logging.getLogger(__name__)

MAX_CONTENT = 2000  # Discord's message limit


class DiscordUnavailable(RuntimeError):
    """Discord (or its stand-in) refused or could not be reached; the outbox retries the item."""


def bot_token() -> str:
    path = str(getattr(settings, "TESS_DISCORD_BOT_TOKEN_FILE", "") or "")
    if path:
        return Path(path).read_text().strip()
    return str(getattr(settings, "TESS_DISCORD_BOT_TOKEN", "") or "")


def _request(method: str, path: str, body: dict[str, Any], *, bot: bool = False) -> dict[str, Any]:
    headers = {"User-Agent": "Tess (https://example.invalid, 1.0)"}
    if bot:
        headers["Authorization"] = f"Bot {bot_token()}"
    url = settings.TESS_DISCORD_API_BASE.rstrip("/") + path
    try:
        response = httpx.request(method, url, json=body, headers=headers, timeout=10)
    except httpx.HTTPError as exc:
        raise DiscordUnavailable(f"{method} {path}: {type(exc).__name__}") from exc
    if response.status_code >= 400:
        raise DiscordUnavailable(f"{method} {path}: HTTP {response.status_code}")
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _content(text: str) -> dict[str, Any]:
    return {"content": text[:MAX_CONTENT], "allowed_mentions": {"parse": []}}


def frame_text(frame: dict[str, Any]) -> str:
    body = frame.get("body") or {}
    text = body.get("text") if isinstance(body, dict) else None
    if not text and frame.get("kind") == "turn.out" and body.get("stopped"):
        return "(stopped before Tess wrote anything)"
    if not text:
        return f"[{frame.get('kind')}] #{frame.get('seq')}"
    if frame.get("kind") == "turn.in":
        return f"[{body.get('channel')}] {text}"
    if frame.get("kind") == "turn.out" and body.get("stopped"):
        return f"{text}\n(stopped: the reply ends here)"
    return str(text)


def followup(interaction: DiscordInteraction, text: str) -> None:
    """Replace the deferred "thinking…" message of an interaction with ``text``."""
    _request("PATCH", f"/webhooks/{interaction.application_id}/{interaction.token}/messages/@original", _content(text))


def send_outbox_frame(external_ref: str, frame: dict[str, Any]) -> None:
    """The outbox sender: ``interaction:<pk>`` follows up an interaction; a channel id posts with the bot."""
    if external_ref.startswith("interaction:"):
        interaction = DiscordInteraction.objects.get(pk=int(external_ref.split(":", 1)[1]))
        followup(interaction, frame_text(frame))
        return
    if not bot_token():
        raise DiscordUnavailable("posting to a channel needs TESS_DISCORD_BOT_TOKEN")
    _request("POST", f"/channels/{external_ref}/messages", _content(frame_text(frame)), bot=True)


def notify_bound_channels(approval: Approval, notice: dict[str, Any]) -> None:
    """Shared notifier: every Discord channel bound to the approval's session gets the notice (never a link)."""
    if not approval.session_id or not bot_token():
        return
    channels = IngressBinding.objects.filter(
        session_id=approval.session_id, channel=IngressChannel.DISCORD, active=True
    ).values_list("external_ref", flat=True)
    for channel_id in channels:
        try:
            _request("POST", f"/channels/{channel_id}/messages", _content(str(notice["text"])), bot=True)
        except DiscordUnavailable:
            logger.warning("discord notice for approval %s not delivered", approval.pk)


def send_link_privately(approval: Approval, approver: User, url: str) -> None:
    """Private deliverer: a direct message to the approver's linked Discord account, where a bot token exists."""
    if not bot_token():
        return
    ids = ExternalIdentity.objects.filter(
        tenant_id=approval.tenant_id, user=approver, provider=ExternalIdentity.Provider.DISCORD
    ).values_list("external_id", flat=True)
    for discord_user_id in ids:
        try:
            dm = _request("POST", "/users/@me/channels", {"recipient_id": discord_user_id}, bot=True)
            text = f"Approval needed for {approval.action} on {approval.target_type} {approval.target_id}: {url}"
            _request("POST", f"/channels/{dm['id']}/messages", _content(text), bot=True)
        except (DiscordUnavailable, KeyError):
            logger.warning("discord direct message for approval %s not delivered", approval.pk)


def send_inbox_notice(user: User, tenant_id: int, notice: dict[str, str]) -> None:
    """Inbox notifier: a direct message naming what entered the person's inbox, with the inbox item's link only."""
    if not bot_token():
        return
    ids = ExternalIdentity.objects.filter(
        tenant_id=tenant_id, user=user, provider=ExternalIdentity.Provider.DISCORD
    ).values_list("external_id", flat=True)
    for discord_user_id in ids:
        dm = _request("POST", "/users/@me/channels", {"recipient_id": discord_user_id}, bot=True)
        _request("POST", f"/channels/{dm['id']}/messages", _content(f"{notice['title']}: {notice['url']}"), bot=True)
