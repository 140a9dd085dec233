"""A stand-in for ``pi --mode rpc --session <file>`` that makes no model call, for the contract suite.

It speaks the documented protocol (pi-mono ``docs/rpc.md``): JSON lines split on LF only; ``prompt``,
``steer``, ``abort`` and ``get_state`` answered with ``{"type": "response", "id", "command", "success"}``.
A prompt is appended to the session file as a user message entry, as pi does, and its text plus a line
feed to ``<file>.received`` so tests can see exactly what arrived; the names of its environment
variables go to ``<file>.env``.
"""

import json
import os
import secrets
import sys
from datetime import UTC, datetime

args = sys.argv[1:]
session_file = args[args.index("--session") + 1]
with open(session_file + ".env", "w") as names:  # which variables the process inherited (names only)
    json.dump(sorted(os.environ), names)


def last_id():
    leaf = None
    with open(session_file, "rb") as handle:
        for line in handle:
            if line.endswith(b"\n"):
                record = json.loads(line)
                if record.get("type") != "session":
                    leaf = record["id"]
    return leaf


def header_id():
    with open(session_file, "rb") as handle:
        return json.loads(handle.readline())["id"]


def append_prompt(text):
    now = datetime.now(UTC)
    entry = {
        "type": "message",
        "id": secrets.token_hex(4),
        "parentId": last_id(),
        "timestamp": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "message": {"role": "user", "content": text, "timestamp": int(now.timestamp() * 1000)},
    }
    with open(session_file, "ab") as handle:
        handle.write(json.dumps(entry, ensure_ascii=False).encode() + b"\n")
    with open(session_file + ".received", "ab") as handle:
        handle.write(text.encode() + b"\n")


def append_answer(text):
    now = datetime.now(UTC)
    entry = {
        "type": "message",
        "id": secrets.token_hex(4),
        "parentId": last_id(),
        "timestamp": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "stopReason": "stop",
            "timestamp": int(now.timestamp() * 1000),
        },
    }
    with open(session_file, "ab") as handle:
        handle.write(json.dumps(entry).encode() + b"\n")


def respond(command, success=True, **extra):
    record = {"type": "response", "command": command.get("type"), "success": success, **extra}
    if "id" in command:
        record["id"] = command["id"]
    sys.stdout.buffer.write(json.dumps(record).encode() + b"\n")
    sys.stdout.buffer.flush()


turn_open = False
buffer = b""
while True:
    block = sys.stdin.buffer.read1(65536)  # type: ignore[union-attr]
    if not block:
        break
    buffer += block
    while b"\n" in buffer:
        line, buffer = buffer.split(b"\n", 1)
        command = json.loads(line.removesuffix(b"\r"))
        kind = command.get("type")
        if kind == "prompt":
            append_prompt(command["message"])
            turn_open = os.environ.get("PI_PEER_TURNS") == "1"
            respond(command)
        elif kind == "steer":
            with open(session_file + ".received", "ab") as handle:
                handle.write(b"steer:" + command["message"].encode() + b"\n")
            respond(command)
        elif kind == "abort":
            with open(session_file + ".received", "ab") as handle:
                handle.write(b"abort\n")
            respond(command)
        elif kind == "get_state":
            # PI_PEER_STREAMING=1 plays an agent still working on a turn; PI_PEER_TURNS=1 one that works on
            # each prompt until a test makes <file>.finish, then writes its answer and idles.
            streaming = os.environ.get("PI_PEER_STREAMING") == "1" or turn_open
            if turn_open and os.path.exists(session_file + ".finish"):
                os.remove(session_file + ".finish")
                append_answer("done")
                turn_open = streaming = False
            respond(command, data={"sessionId": header_id(), "sessionFile": session_file, "isStreaming": streaming})
        else:
            respond(command, success=False, error=f"Unknown command: {kind}")
