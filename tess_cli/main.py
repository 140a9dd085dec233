"""``tess``: the Tess command-line client. ``tess --help`` lists the commands and exit codes."""

from __future__ import annotations

import argparse
import getpass
import itertools
import json
import shutil
import ssl
import sys
import time
from datetime import date
from typing import Any

import httpx

from . import __version__, ids
from . import config as config_store
from .ask import ReplyWatch
from .client import AUTH, EXIT_CODES, INTERRUPTED, NETWORK, OK, REFUSED, USAGE, Api, CliError
from .inbox import watch
from .output import emit_json, event_line, fields, neutralised_output, plural, table, write_raw
from .stream import follow

SESSION_COLUMNS = ["id", "title", "status", "agent_state", "agent_state_since", "owner", "provider", "last_seq"]
SESSION_HELP = "a session id, or enough of its first characters to be unique among yours"
APPROVAL_COLUMNS = ["id", "action", "target_id", "status", "requester", "expires_at"]
INBOX_COLUMNS = ["kind", "id", "title", "since"]
CARD_COLUMNS = ["id", "kind", "status", "session_id", "created_at"]
USAGE_COLUMNS = ["group", "cost", "currency", "unpriced_steps", "steps", "input_tokens", "output_tokens"]


def _api(args: argparse.Namespace, **kwargs: Any) -> Api:
    return Api(config_store.load(), **kwargs)


def _session(api: Api, args: argparse.Namespace) -> str:
    """The session id the user meant: a full id or a unique prefix of one they can see."""
    return ids.resolve(api, ids.SESSION, args.session)


def _session_in_use(api: Api, args: argparse.Namespace) -> str:
    """The session a command that uses one (ask, send, attach, stream) talks to: the one named, bound to this
    profile as it is used; or, if a cutover moved this profile from it to another session, that one, said
    once on this command's output (on standard error with --json, so scripts still read JSON)."""
    named = _session(api, args)
    bound = api.post(f"/api/v1/sessions/{named}/bind/", idempotent=False)
    followed = bound.get("followed")
    if not followed:
        return named
    now = str(bound["session_id"])
    print(
        f"Session {named} was cut over to session {now} (migration {followed.get('migration')}): "
        f"this profile now uses {now}.",
        file=sys.stderr if getattr(args, "json", False) else sys.stdout,
        flush=True,
    )
    return now


def _results(data: Any) -> list[dict[str, Any]]:
    return list(data.get("results", [])) if isinstance(data, dict) else list(data)


# --- identity ---------------------------------------------------------------------------------------


def cmd_login(args: argparse.Namespace) -> int:
    config = config_store.load()
    if args.url:
        config.url = args.url
    if args.token_stdin or (not args.username and not args.password_stdin):
        token = sys.stdin.readline().strip() if args.token_stdin else getpass.getpass("Personal token: ").strip()
        config.token = token
    else:
        username = args.username or input("Username: ").strip()
        password = sys.stdin.readline().rstrip("\n") if args.password_stdin else getpass.getpass("Password: ")
        body: dict[str, Any] = {"username": username, "password": password, "name": "tess-cli"}
        if args.tenant:
            body["tenant_slug"] = args.tenant
        config.token = _login_call(config, "POST", "/api/v1/auth/token/", body)["token"]
    me = _login_call(config, "GET", "/api/v1/me/")
    config.username, config.tenant = me["username"], me["tenant_slug"]
    path = config_store.save(config)
    print(f"Logged in to {config.url} as {me['username']} ({me['tenant_slug']}); token saved in {path}.")
    return OK


def _login_call(config: config_store.Config, method: str, path: str, body: Any = None) -> Any:
    """One call of ``tess login``, its failure said in words: what the server refused, or why it could not be
    reached. Nothing is saved unless both calls succeed."""
    http = httpx.Client(base_url=config.url.rstrip("/"), timeout=30.0, headers={"User-Agent": "tess-cli"})
    if config.token and method == "GET":
        http.headers["Authorization"] = f"Bearer {config.token}"
    try:
        response = http.request(method, path, json=body)
    except httpx.HTTPError as exc:
        raise CliError(f"Login failed: {_unreachable(config.url, exc)}", NETWORK) from exc
    if response.status_code < 400:
        return response.json()
    try:
        error = response.json().get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    said = error.get("message") or response.reason_phrase
    if response.status_code == 429:
        wait = response.headers.get("Retry-After")
        later = f" Try again in {wait} s." if wait and wait.isdigit() else " Try again later."
        raise CliError(f"Login refused: too many attempts from here or for this account.{later}", REFUSED)
    if response.status_code == 401 and method == "POST":
        raise CliError(f"Login failed: the username or password is wrong ({said}).", AUTH)
    if response.status_code == 401:
        raise CliError("Login failed: the server does not accept this token (wrong, expired or revoked).", AUTH)
    if response.status_code == 403:
        raise CliError(f"Login refused: {said}", AUTH)
    if response.status_code == 404:
        raise CliError(f"Login failed: {config.url} answered 404; is it a Tess server? (check --url)", NETWORK)
    raise CliError(f"Login failed: the server answered HTTP {response.status_code}: {said}", REFUSED)


def _unreachable(url: str, exc: httpx.HTTPError) -> str:
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"the TLS certificate of {url} is not trusted ({cause.verify_message})."
        if isinstance(cause, ssl.SSLError):
            return f"the TLS handshake with {url} failed ({cause.reason or cause}); is it https?"
        if isinstance(cause, ConnectionRefusedError):
            return f"nothing answers at {url} (connection refused); is the server running, and is the port right?"
        cause = cause.__cause__ or cause.__context__
    if isinstance(exc, httpx.TimeoutException):
        return f"{url} did not answer in time."
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect to {url} ({exc})."
    return f"cannot reach {url} ({type(exc).__name__}: {exc})."


def cmd_logout(args: argparse.Namespace) -> int:
    config = config_store.load()
    config.token = ""
    config_store.save(config)
    print("Logged out (token removed from the config; revoke it in the admin if it leaked).")
    return OK


def cmd_whoami(args: argparse.Namespace) -> int:
    me = _api(args).get("/api/v1/me/")
    if args.json:
        emit_json(me)
    else:
        fields({**me, "roles": ", ".join(me.get("roles", []))}, ["username", "tenant_slug", "roles", "channel"])
    return OK


def cmd_link_code(args: argparse.Namespace) -> int:
    data = _api(args).post("/api/v1/identities/discord/link-codes/")
    if args.json:
        emit_json(data)
    else:
        print(f"In Discord, run: /tess link {data['code']}   (valid until {data['expires_at']}, once)")
    return OK


# --- sessions ---------------------------------------------------------------------------------------


def cmd_sessions(args: argparse.Namespace) -> int:
    api = _api(args)
    if args.action == "list":
        data = _results(api.get("/api/v1/sessions/"))
        emit_json(data) if args.json else table(data, SESSION_COLUMNS, "No sessions.")
    elif args.action == "show":
        data = api.get(f"/api/v1/sessions/{_session(api, args)}/")
        emit_json(data) if args.json else fields(data, [k for k in data if not isinstance(data[k], dict | list)])
    else:
        data = api.get(f"/api/v1/sessions/{_session(api, args)}/tree/")
        if args.json:
            emit_json(data)
        else:
            for line in tree_lines(data.get("nodes", [])):
                print(line)
    return OK


def tree_lines(nodes: list[dict[str, Any]], depth: int = 0) -> list[str]:
    lines = []
    for node in nodes:
        mark = "*" if node.get("active") else "-"
        lines.append(f"{'  ' * depth}{mark} {node.get('kind', '')} {node.get('title') or ''} [{node.get('id')}]")
        lines.extend(tree_lines(node.get("children") or [], depth + 1))
    return lines


def screenful() -> int:
    """How many events fit the terminal, keeping a line for the prompt (24-line default off a terminal)."""
    return max(1, shutil.get_terminal_size((80, 24)).lines - 2)


ENDED = ("exited", "terminated")


def cmd_stream(args: argparse.Namespace) -> int:
    config = config_store.load()
    api = Api(config)
    session_id = _session_in_use(api, args)
    session = api.get(f"/api/v1/sessions/{session_id}/")
    shown = 0

    def show(frame: dict[str, Any]) -> bool:
        nonlocal shown
        shown += 1
        if args.raw and frame.get("kind") == "output":
            write_raw(str((frame.get("body") or {}).get("data", "")))
        else:
            print(json.dumps(frame) if args.json else event_line(frame), flush=True)
        ended = frame.get("kind") == "status" and (frame.get("body") or {}).get("status") in ENDED
        return ended or bool(args.max_events and shown >= args.max_events)

    def ended(status: str) -> int:
        line = f"Session {session.get('title') or session_id} has ended ({status})."
        print(line, file=sys.stderr if args.json or args.raw else sys.stdout, flush=True)
        return OK

    if args.from_start or args.cursor is not None:
        cursor = args.cursor or 0
    else:
        page = api.get(f"/api/v1/sessions/{session_id}/events/", params={"tail": args.tail or screenful()})
        for frame in page["events"]:
            if show(frame):
                return ended(frame["body"]["status"]) if frame.get("kind") == "status" else OK
        cursor = int(page["next_cursor"])
    if session.get("status") in ENDED:
        while True:  # nothing more will come live: read what is left and stop
            page = api.get(f"/api/v1/sessions/{session_id}/events/", params={"cursor": cursor, "limit": 1000})
            for frame in page["events"]:
                if show(frame):
                    return OK if frame.get("kind") != "status" else ended(frame["body"]["status"])
            if not page["events"]:
                return ended(str(session["status"]))
            cursor = int(page["next_cursor"])
    last: dict[str, Any] = {}

    def on_event(frame: dict[str, Any]) -> bool:
        last.update(frame)
        return show(frame)

    def on_moved(body: dict[str, Any]) -> bool:
        """A cutover moved this profile while streaming: say where to, and stream that session from there."""
        nonlocal session_id
        print(
            f"Session {body.get('from')} was cut over to session {body['to']} (migration {body.get('migration')}): "
            f"this profile now uses {body['to']}; streaming it.",
            file=sys.stderr if args.json or args.raw else sys.stdout,
            flush=True,
        )
        session_id = str(body["to"])
        session.update(api.get(f"/api/v1/sessions/{session_id}/"))
        return True

    follow(config, session_id, cursor=cursor, on_event=on_event, on_moved=on_moved)
    if last.get("kind") == "status":
        return ended(str((last.get("body") or {}).get("status")))
    return OK


def cmd_ask(args: argparse.Namespace) -> int:
    api = _api(args)
    session_id = _session_in_use(api, args)
    # The session's socket, opened first, prints the reply as it is written (``ask.ReplyWatch``).
    cursor = int(api.get(f"/api/v1/sessions/{session_id}/").get("last_seq") or 0)
    watch = ReplyWatch(api.config, session_id, cursor, show=not args.json).start()
    watch.arm()
    try:
        response = api.request(
            "POST", f"/api/v1/sessions/{session_id}/turns/", json={"text": args.text}, idempotent=True, retries=2
        )
    except KeyboardInterrupt:
        return _stop_turn(api, session_id, watch, as_json=args.json)
    finally:
        if not watch.ended.is_set():
            watch.close()
    data = response.json()
    if args.json:
        emit_json(data)
        return OK
    watch.finish(str(data.get("reply", "")))
    if data.get("stopped"):
        print("(stopped: the reply ends here)")
    for approval in data.get("approvals", []):
        print(f"approval {approval.get('id')}: {approval.get('status')}")
    for card in data.get("cards", []):
        print(f"card {card.get('id')}: {card.get('status')} (confirm it in the drawer)")
    for handoff in data.get("handoffs", []):
        print(f"hand-off {handoff.get('id')}: {handoff.get('status')}")
    return OK


STOP_WAIT_SECONDS = 15.0


def _stop_turn(api: Api, session_id: str, watch: ReplyWatch, *, as_json: bool) -> int:
    """Ctrl-C while Tess answers: stop the turn, and show it as it was written."""
    if not watch.announced.wait(3.0) or watch.turn_id is None:
        print("tess: interrupted before the turn was announced; it may still be answered.", file=sys.stderr)
        return INTERRUPTED
    stop = api.post(f"/api/v1/sessions/{session_id}/turns/{watch.turn_id}/stop/", idempotent=False)
    written = watch.ended.wait(STOP_WAIT_SECONDS)
    watch.close()
    if as_json:
        emit_json({"turn_id": watch.turn_id, "stop": stop, "turn_out": watch.out if written else None})
        return INTERRUPTED
    if written:
        watch.finish(str(watch.out.get("text", "")))
    else:
        print("")
    print(f"(stopped: {stop.get('detail', stop.get('status'))})", file=sys.stderr)
    return INTERRUPTED


def cmd_send(args: argparse.Namespace) -> int:
    api = _api(args)
    data = api.request(
        "POST",
        f"/api/v1/sessions/{_session_in_use(api, args)}/messages/",
        json={"text": args.text},
        idempotent=True,
        retries=2,
    )
    body = data.json()
    emit_json(body) if args.json else print(f"Queued as inbox item {body['inbox_id']} ({body['state']}).")
    return OK


def cmd_attach(args: argparse.Namespace) -> int:
    mode = "interactive" if args.interactive else "read_only"
    api = _api(args)
    data = api.post(f"/api/v1/sessions/{_session_in_use(api, args)}/attach/", {"mode": mode})
    emit_json(data) if args.json else print(f"Attached {data['mode']} (idle timeout {data['idle_timeout_seconds']}s).")
    return OK


def cmd_detach(args: argparse.Namespace) -> int:
    api = _api(args)
    data = api.post(f"/api/v1/sessions/{_session(api, args)}/detach/")
    emit_json(data) if args.json else print(
        plural(data["detached"], "Detached {n} attachment.", "Detached {n} attachments.")
    )
    return OK


def cmd_terminate(args: argparse.Namespace) -> int:
    api = _api(args)
    body = {"reason": args.reason} if args.reason else {}
    approval = api.request(
        "POST", f"/api/v1/sessions/{_session(api, args)}/terminate/", json=body, idempotent=True, retries=2
    ).json()
    if not args.json:
        print(f"Approval {approval['id']} is pending: an approver was sent a one-time link.")
    if args.wait:
        approval = _wait_for(api, approval, timeout=args.timeout, quiet=args.json)
    if args.json:
        emit_json(approval)
    elif args.wait:
        print(f"Approval {approval['id']} is {outcome_words(approval)}.")
    failed = approval["status"] in ("denied", "expired") or approval.get("execution") == "failed"
    return REFUSED if failed else OK


def outcome_words(approval: dict[str, Any]) -> str:
    """An approval's status and its execution as one phrase ("approved and carried out")."""
    status, execution = approval.get("status"), approval.get("execution")
    if status == "approved":
        return {
            "executed": "approved and carried out",
            "failed": "approved, but carrying it out failed",
        }.get(str(execution), "approved; it is being carried out")
    if status == "expired":
        return "expired: nobody decided in time"
    return str(status)


def _wait_for(api: Api, approval: dict[str, Any], *, timeout: float, quiet: bool) -> dict[str, Any]:
    spinner = itertools.cycle("|/-\\")
    deadline = time.monotonic() + timeout
    tty = sys.stderr.isatty() and not quiet
    if not tty and not quiet:
        print("waiting for an approver…", file=sys.stderr, flush=True)
    while approval["status"] == "pending" or (
        approval["status"] == "approved" and approval.get("execution") in ("none", "queued")
    ):
        if time.monotonic() > deadline:
            raise CliError(f"Still {approval['status']} after {timeout:.0f}s.", REFUSED)
        if tty:
            print(f"\rwaiting for an approver {next(spinner)}", end="", file=sys.stderr, flush=True)
        time.sleep(1.0)
        approval = api.get(f"/api/v1/approvals/{approval['id']}/")
    if tty:
        print("\r" + " " * 30 + "\r", end="", file=sys.stderr)
    return approval


# --- approvals, memory, hand-offs --------------------------------------------------------------------


def cmd_approvals(args: argparse.Namespace) -> int:
    api = _api(args)
    if args.action == "open":
        # Your own fresh one-time link; the older one you were sent stops working.
        data = api.post(f"/api/v1/approvals/{ids.resolve(api, ids.APPROVAL, args.approval)}/open/")
        emit_json(data) if args.json else print(data["url"])
        return OK
    if args.action == "resend":
        data = api.post(f"/api/v1/approvals/{ids.resolve(api, ids.APPROVAL, args.approval)}/resend/")
        sent = plural(data["sent"], "{n} approver", "{n} approvers")
        emit_json(data) if args.json else print(f"Sent a fresh link to {sent}, privately.")
        return OK
    params = {"status": args.status} if args.status else None
    data = _results(api.get("/api/v1/approvals/", params=params))
    emit_json(data) if args.json else table(data, APPROVAL_COLUMNS, "No approvals.")
    return OK


def cmd_inbox(args: argparse.Namespace) -> int:
    config = config_store.load()
    api = Api(config)
    if not args.watch:
        data = _results(api.get("/api/v1/inbox/"))
        emit_json(data) if args.json else table(data, INBOX_COLUMNS, "Nothing is waiting on you.")
        return OK

    def show(items: list[dict[str, Any]]) -> None:
        if args.json:
            print(json.dumps(items), flush=True)
            return
        print(f"--- {time.strftime('%H:%M:%S')}: {len(items)} waiting on you", flush=True)
        table(items, INBOX_COLUMNS, "Nothing is waiting on you.")
        sys.stdout.flush()

    try:
        watch(config, on_change=show, max_updates=args.max_updates)
    except KeyboardInterrupt:
        print("", file=sys.stderr)
        return INTERRUPTED
    return OK


def _day(text: str) -> str:
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a day as YYYY-MM-DD, not {text!r}") from None


def cmd_usage(args: argparse.Namespace) -> int:
    params = {"group_by": args.group_by} | {k: v for k in ("since", "until") if (v := getattr(args, k))}
    data = _results(_api(args).get("/api/v1/usage/", params=params))
    if args.json:
        emit_json(data)
        return OK
    for row in data:  # an unpriced step has no cost: shown as such, never as 0
        row["cost"] = row["cost"] if row["cost"] is not None else "-"
        row["currency"] = row["currency"] or "-"
    table(data, USAGE_COLUMNS, "No usage recorded (a runtime that reports none, such as tmux, never has any).")
    return OK


def cmd_cards(args: argparse.Namespace) -> int:
    api = _api(args)
    if args.action == "list":
        data = _results(api.get("/api/v1/cards/", params={"status": "pending"}))
        emit_json(data) if args.json else table(data, CARD_COLUMNS, "No pending cards.")
        return OK
    data = api.post(f"/api/v1/cards/{ids.resolve(api, ids.CARD, args.card)}/{args.action}/")
    emit_json(data) if args.json else print(
        f"Card {data.get('card', {}).get('status', args.action)}: {data.get('outcome', '')}"
    )
    return OK


def cmd_memory(args: argparse.Namespace) -> int:
    api = _api(args)
    if args.action == "list":
        data = api.get("/api/v1/memory/")
        if args.json:
            emit_json(data)
        elif not data.get("served"):
            print("Operator memory is off for you.")
        else:
            table(data.get("rows", []), ["category", "slot", "value", "revision", "expires_at"], "No notes.")
        return OK
    if args.action == "forget":
        params: dict[str, Any] = {"category": args.category, "slot": args.slot or ""}
        prompt = f"Forget your note {args.category}/{args.slot}" if args.slot else f"Forget every {args.category} note"
    else:
        params, prompt = {"all": "true"}, "Forget ALL your operator memory"
    if not args.yes:
        if not sys.stdin.isatty():
            raise CliError("Refusing to forget without confirmation: pass --yes.", USAGE)
        if input(f"{prompt}? This cannot be undone. [y/N] ").strip().lower() not in ("y", "yes"):
            print("Nothing forgotten.")
            return OK
    data = api.request("DELETE", "/api/v1/memory/", params=params).json()
    if args.json:
        emit_json(data)
        return OK
    print(plural(data["deleted_count"], "Forgot {n} note.", "Forgot {n} notes."))
    if data.get("redacted_count"):
        print(
            plural(
                data["redacted_count"],
                "Redacted {n} message in your sessions.",
                "Redacted {n} messages in your sessions.",
            )
        )
    return OK


def cmd_handoffs(args: argparse.Namespace) -> int:
    data = _results(_api(args).get("/api/v1/handoffs/"))
    cols = ["id", "session_id", "status", "summary", "created_at"]
    emit_json(data) if args.json else table(data, cols, "No hand-offs.")
    return OK


# --- the parser -------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON for scripts instead of tables")
    parser = argparse.ArgumentParser(
        prog="tess",
        description="Tess from the command line. Configuration: $XDG_CONFIG_HOME/tess/config.json "
        "(TESS_URL and TESS_TOKEN override it).",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tess {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("login", parents=[common], help="log in with a username and password, or a pasted token")
    p.add_argument("--url", help="the Tess server, e.g. https://tess.example.com")
    p.add_argument("--username")
    p.add_argument("--tenant", help="tenant slug, when you belong to several")
    p.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    p.add_argument("--token-stdin", action="store_true", help="read a personal token from standard input")
    p.set_defaults(func=cmd_login)
    sub.add_parser("logout", parents=[common], help="forget the stored token").set_defaults(func=cmd_logout)
    sub.add_parser("whoami", parents=[common], help="who the token belongs to").set_defaults(func=cmd_whoami)
    sub.add_parser("link-code", parents=[common], help="a one-time code for `/tess link` in Discord").set_defaults(
        func=cmd_link_code
    )

    p = sub.add_parser("sessions", parents=[common], help="list, show or walk sessions")
    p.add_argument("action", choices=["list", "show", "tree"])
    p.add_argument("session", nargs="?", help=SESSION_HELP)
    p.set_defaults(func=cmd_sessions)

    p = sub.add_parser(
        "stream",
        parents=[common],
        help="show a session's latest events, then follow it live until it ends (Ctrl-C to stop); "
        "a cutover of the session moves the stream to its new session",
    )
    p.add_argument("session", help=SESSION_HELP)
    start = p.add_mutually_exclusive_group()
    start.add_argument("--tail", type=int, metavar="N", help="start with the last N events (default: a screenful)")
    start.add_argument("--from-start", action="store_true", help="start with the session's first event")
    start.add_argument("--cursor", type=int, help="start after this seq")
    p.add_argument("--max-events", type=int, default=0, help="stop after this many events")
    p.add_argument(
        "--raw",
        action="store_true",
        help="write the runtime's output bytes as they are, terminal control sequences included",
    )
    p.set_defaults(func=cmd_stream)

    for name, func, text in (
        ("ask", cmd_ask, "a turn with Tess (the reply prints as it is written; Ctrl-C stops it)"),
        ("send", cmd_send, "raw input to the runtime (needs `attach --interactive`)"),
    ):
        p = sub.add_parser(name, parents=[common], help=text)
        p.add_argument("session", help=SESSION_HELP)
        p.add_argument("text")
        p.set_defaults(func=func)

    p = sub.add_parser("attach", parents=[common], help="attach to a session (read-only unless --interactive)")
    p.add_argument("session", help=SESSION_HELP)
    p.add_argument("--interactive", action="store_true")
    p.set_defaults(func=cmd_attach)
    p = sub.add_parser("detach", parents=[common], help="end your attachment")
    p.add_argument("session", help=SESSION_HELP)
    p.set_defaults(func=cmd_detach)

    p = sub.add_parser("terminate", parents=[common], help="ask to terminate a session (needs an approval)")
    p.add_argument("session", help=SESSION_HELP)
    p.add_argument("--reason", default="")
    p.add_argument("--wait", action="store_true", help="wait for the approval's outcome")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to wait (default 900)")
    p.set_defaults(func=cmd_terminate)

    p = sub.add_parser("approvals", parents=[common], help="approvals you requested or may decide")
    p.add_argument("action", choices=["list", "open", "resend"])
    p.add_argument("approval", nargs="?", help="open: mint your own one-time link; resend: to every approver")
    p.add_argument("--status", choices=["pending", "approved", "denied", "expired"])
    p.set_defaults(func=cmd_approvals)

    p = sub.add_parser("inbox", parents=[common], help="what waits on you (--watch follows it live)")
    p.add_argument("--watch", action="store_true", help="follow the inbox live over the socket (Ctrl-C to stop)")
    p.add_argument("--max-updates", type=int, default=0, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_inbox)

    p = sub.add_parser("usage", parents=[common], help="what your agents cost, summed per day, operator, ...")
    p.add_argument("--group-by", choices=["day", "operator", "provider", "model", "session"], default="day")
    p.add_argument("--since", type=_day, help="the first day to include (YYYY-MM-DD, UTC)")
    p.add_argument("--until", type=_day, help="the last day to include (YYYY-MM-DD, UTC)")
    p.set_defaults(func=cmd_usage)

    p = sub.add_parser("cards", parents=[common], help="your pending cards: list, confirm or dismiss one")
    p.add_argument("action", choices=["list", "confirm", "dismiss"])
    p.add_argument("card", nargs="?")
    p.set_defaults(func=cmd_cards)

    p = sub.add_parser("memory", parents=[common], help="your operator memory")
    p.add_argument("action", choices=["list", "forget", "forget-all"])
    p.add_argument("category", nargs="?")
    p.add_argument("slot", nargs="?")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=cmd_memory)

    p = sub.add_parser("handoffs", parents=[common], help="Mos hand-offs")
    p.add_argument("action", choices=["list"])
    p.set_defaults(func=cmd_handoffs)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "sessions" and args.action != "list" and not args.session:
        parser.error("sessions show|tree needs a session id")
    if args.command == "stream" and args.tail is not None and not 1 <= args.tail <= 1000:
        parser.error("--tail takes 1 to 1000 events")
    if args.command == "approvals" and args.action != "list" and not args.approval:
        parser.error(f"approvals {args.action} needs an approval id")
    if args.command == "cards" and args.action != "list" and not args.card:
        parser.error(f"cards {args.action} needs a card id")
    if args.command == "memory" and args.action == "forget" and not args.category:
        parser.error("memory forget needs a category (and optionally a slot)")
    with neutralised_output():
        try:
            return int(args.func(args))
        except CliError as exc:
            print(f"tess: {exc.message}", file=sys.stderr)
            return exc.code
        except KeyboardInterrupt:
            print("", file=sys.stderr)
            return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
