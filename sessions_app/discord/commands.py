"""``/tess`` subcommands: each returns the interaction response Discord shows (within its 3 seconds)."""

from __future__ import annotations

from typing import Any

from django.utils.translation import ngettext

from memory_app.selectors import memory_snapshot
from sessions_app import selectors
from tess_site.errors import InvalidInput, TessError

from . import services

PONG = {"type": 1}
MESSAGE = 4  # CHANNEL_MESSAGE_WITH_SOURCE
DEFERRED = 5  # DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE
EPHEMERAL = 64
SUBCOMMANDS = ("ask", "status", "sessions", "bind", "link", "memory")


def reply(text: str, *, ephemeral: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {"content": text[:2000], "allowed_mentions": {"parse": []}}
    if ephemeral:
        data["flags"] = EPHEMERAL
    return {"type": MESSAGE, "data": data}


def _object(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one: a malformed interaction is refused, never a 500."""
    return value if isinstance(value, dict) else {}


def _subcommand(interaction: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    data = _object(interaction.get("data"))
    options = data.get("options")
    first = _object(options[0]) if isinstance(options, list) and options else {}
    if data.get("name") != "tess" or not isinstance(first.get("name"), str) or first["name"] not in SUBCOMMANDS:
        raise InvalidInput(f"Unknown command; try /tess {'|'.join(SUBCOMMANDS)}.")
    inner = first.get("options")
    args = {str(o.get("name")): o.get("value") for o in inner if isinstance(o, dict)} if isinstance(inner, list) else {}
    return str(first["name"]), args


def _user_id(interaction: dict[str, Any]) -> str:
    user = _object(_object(interaction.get("member")).get("user")) or _object(interaction.get("user"))
    user_id = user.get("id")
    if not isinstance(user_id, str | int) or isinstance(user_id, bool) or not 0 < len(str(user_id)) <= 64:
        raise InvalidInput("No Discord user in the interaction.")
    return str(user_id)


def _channel_id(interaction: dict[str, Any]) -> str:
    channel_id = interaction.get("channel_id") or ""
    if not isinstance(channel_id, str | int) or isinstance(channel_id, bool) or len(str(channel_id)) > 64:
        raise InvalidInput("The interaction's channel is not a Discord channel id.")
    return str(channel_id)


def handle_command(interaction: dict[str, Any], *, correlation_id: str) -> dict[str, Any]:
    """Answer one application command; refusals are ephemeral so only the caller sees them."""
    try:
        name, args = _subcommand(interaction)
        user_id = _user_id(interaction)
        channel_id = _channel_id(interaction)
        if name == "link":
            services.link_code_redeem(
                discord_user_id=user_id, code=str(args.get("code") or ""), correlation_id=correlation_id
            )
            return reply("Linked: your Discord account now acts as your Tess user.", ephemeral=True)
        scope = services.discord_scope(discord_user_id=user_id, channel_id=channel_id, correlation_id=correlation_id)
        if name == "ask":
            services.ask_defer(
                scope=scope, interaction=interaction, channel_id=channel_id, text=str(args.get("text") or "")
            )
            return {"type": DEFERRED}
        if name == "bind":
            binding = services.channel_bind(
                scope=scope, channel_id=channel_id, session_id=str(args.get("session") or "")
            )
            return reply(f"This channel is now bound to session {binding.session_id}.")
        if name == "status":
            session = services.bound_session(scope=scope, channel_id=channel_id)
            events = ngettext("%(n)d event", "%(n)d events", session.last_seq) % {"n": session.last_seq}
            return reply(f"Session \u201c{session.title}\u201d ({session.pk}) is {session.status}; {events} so far.")
        if name == "sessions":
            rows = list(selectors.sessions_visible(scope=scope).order_by("-created_at")[:20])
            lines = [f"{s.pk}  {s.status:<10}  {s.title}" for s in rows] or ["No sessions."]
            return reply("\n".join(lines), ephemeral=True)
        snapshot = memory_snapshot(scope=scope)
        if not snapshot.served:
            return reply("Operator memory is off for you.", ephemeral=True)
        count = len(snapshot.rows)
        notes = ngettext("You have %(n)d operator note", "You have %(n)d operator notes", count) % {"n": count}
        return reply(f"{notes}; inspect or forget them in the drawer or `tess memory`.", ephemeral=True)
    except TessError as exc:
        return reply(f"Refused: {exc.message}", ephemeral=True)
