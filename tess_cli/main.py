"""``tess``: the Tess command-line client. ``tess --help`` lists the commands and exit codes."""

from __future__ import annotations

import argparse
import getpass
import itertools
import json
import sys
import time
from typing import Any

from . import config as config_store
from .client import EXIT_CODES, INTERRUPTED, OK, REFUSED, USAGE, Api, CliError
from .output import emit_json, event_line, fields, neutralised_output, table, write_raw
from .stream import follow

SESSION_COLUMNS = ["id", "title", "status", "agent_state", "agent_state_since", "owner", "provider", "last_seq"]
APPROVAL_COLUMNS = ["id", "action", "target_id", "status", "requester", "expires_at"]


def _api(args: argparse.Namespace, **kwargs: Any) -> Api:
    return Api(config_store.load(), **kwargs)


def _results(data: Any) -> list[dict[str, Any]]:
    return list(data.get("results", [])) if isinstance(data, dict) else list(data)


# --- identity ---------------------------------------------------------------------------------------


def cmd_login(args: argparse.Namespace) -> int:
    config = config_store.load()
    if args.url:
        config.url = args.url
    api = Api(config, require_token=False)
    if args.token_stdin or (not args.username and not args.password_stdin):
        token = sys.stdin.readline().strip() if args.token_stdin else getpass.getpass("Personal token: ").strip()
        config.token = token
    else:
        username = args.username or input("Username: ").strip()
        password = sys.stdin.readline().rstrip("\n") if args.password_stdin else getpass.getpass("Password: ")
        body: dict[str, Any] = {"username": username, "password": password, "name": "tess-cli"}
        if args.tenant:
            body["tenant_slug"] = args.tenant
        config.token = api.post("/api/v1/auth/token/", body)["token"]
    me = Api(config).get("/api/v1/me/")
    config.username, config.tenant = me["username"], me["tenant_slug"]
    path = config_store.save(config)
    print(f"Logged in to {config.url} as {me['username']} ({me['tenant_slug']}); token saved in {path}.")
    return OK


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
        data = api.get(f"/api/v1/sessions/{args.session}/")
        emit_json(data) if args.json else fields(data, [k for k in data if not isinstance(data[k], dict | list)])
    else:
        data = api.get(f"/api/v1/sessions/{args.session}/tree/")
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


def cmd_stream(args: argparse.Namespace) -> int:
    config = config_store.load()
    Api(config)  # refuses early without a token

    def show(frame: dict[str, Any]) -> None:
        if args.raw and frame.get("kind") == "output":
            write_raw(str((frame.get("body") or {}).get("data", "")))
            return
        print(json.dumps(frame) if args.json else event_line(frame), flush=True)

    try:
        follow(config, args.session, cursor=args.cursor, on_event=show, max_events=args.max_events)
    except KeyboardInterrupt:
        print("", file=sys.stderr)
    return OK


def cmd_ask(args: argparse.Namespace) -> int:
    response = _api(args).request(
        "POST", f"/api/v1/sessions/{args.session}/turns/", json={"text": args.text}, idempotent=True, retries=2
    )
    data = response.json()
    if args.json:
        emit_json(data)
        return OK
    print(data.get("reply", ""))
    for approval in data.get("approvals", []):
        print(f"approval {approval.get('id')}: {approval.get('status')}")
    for card in data.get("cards", []):
        print(f"card {card.get('id')}: {card.get('status')} (confirm it in the drawer)")
    for handoff in data.get("handoffs", []):
        print(f"hand-off {handoff.get('id')}: {handoff.get('status')}")
    return OK


def cmd_send(args: argparse.Namespace) -> int:
    data = _api(args).request(
        "POST", f"/api/v1/sessions/{args.session}/messages/", json={"text": args.text}, idempotent=True, retries=2
    )
    body = data.json()
    emit_json(body) if args.json else print(f"Queued as inbox item {body['inbox_id']} ({body['state']}).")
    return OK


def cmd_attach(args: argparse.Namespace) -> int:
    mode = "interactive" if args.interactive else "read_only"
    data = _api(args).post(f"/api/v1/sessions/{args.session}/attach/", {"mode": mode})
    emit_json(data) if args.json else print(f"Attached {data['mode']} (idle timeout {data['idle_timeout_seconds']}s).")
    return OK


def cmd_detach(args: argparse.Namespace) -> int:
    data = _api(args).post(f"/api/v1/sessions/{args.session}/detach/")
    emit_json(data) if args.json else print(f"Detached {data['detached']} attachment(s).")
    return OK


def cmd_terminate(args: argparse.Namespace) -> int:
    api = _api(args)
    body = {"reason": args.reason} if args.reason else {}
    approval = api.request(
        "POST", f"/api/v1/sessions/{args.session}/terminate/", json=body, idempotent=True, retries=2
    ).json()
    if not args.json:
        print(f"Approval {approval['id']} is {approval['status']}: an approver was sent a one-time link.")
    if args.wait:
        approval = _wait_for(api, approval, timeout=args.timeout, quiet=args.json)
    if args.json:
        emit_json(approval)
    elif args.wait:
        print(f"Approval {approval['id']} is {approval['status']} (execution: {approval.get('execution')}).")
    failed = approval["status"] in ("denied", "expired") or approval.get("execution") == "failed"
    return REFUSED if failed else OK


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
    params = {"status": args.status} if args.status else None
    data = _results(_api(args).get("/api/v1/approvals/", params=params))
    emit_json(data) if args.json else table(data, APPROVAL_COLUMNS, "No approvals.")
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
    emit_json(data) if args.json else print(f"Forgot {data['deleted_count']} note(s).")
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
    p.add_argument("session", nargs="?")
    p.set_defaults(func=cmd_sessions)

    p = sub.add_parser("stream", parents=[common], help="follow a session's events live (Ctrl-C to stop)")
    p.add_argument("session")
    p.add_argument("--cursor", type=int, default=0, help="start after this seq (default: from the beginning)")
    p.add_argument("--max-events", type=int, default=0, help="stop after this many events")
    p.add_argument(
        "--raw",
        action="store_true",
        help="write the runtime's output bytes as they are, terminal control sequences included",
    )
    p.set_defaults(func=cmd_stream)

    for name, func, text in (
        ("ask", cmd_ask, "a turn with Tess"),
        ("send", cmd_send, "raw input to the runtime (needs `attach --interactive`)"),
    ):
        p = sub.add_parser(name, parents=[common], help=text)
        p.add_argument("session")
        p.add_argument("text")
        p.set_defaults(func=func)

    p = sub.add_parser("attach", parents=[common], help="attach to a session (read-only unless --interactive)")
    p.add_argument("session")
    p.add_argument("--interactive", action="store_true")
    p.set_defaults(func=cmd_attach)
    p = sub.add_parser("detach", parents=[common], help="end your attachment")
    p.add_argument("session")
    p.set_defaults(func=cmd_detach)

    p = sub.add_parser("terminate", parents=[common], help="ask to terminate a session (needs an approval)")
    p.add_argument("session")
    p.add_argument("--reason", default="")
    p.add_argument("--wait", action="store_true", help="wait for the approval's outcome")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to wait (default 900)")
    p.set_defaults(func=cmd_terminate)

    p = sub.add_parser("approvals", parents=[common], help="approvals you requested or may decide")
    p.add_argument("action", choices=["list"])
    p.add_argument("--status", choices=["pending", "approved", "denied", "expired"])
    p.set_defaults(func=cmd_approvals)

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
