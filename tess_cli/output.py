"""Tables for people, JSON for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any


def emit_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def _cell(value: Any, width: int = 60) -> str:
    text = "" if value is None else str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str], empty: str = "(none)") -> None:
    if not rows:
        print(empty)
        return
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def fields(data: dict[str, Any], keys: Sequence[str]) -> None:
    width = max(len(k) for k in keys)
    for key in keys:
        print(f"{key.ljust(width)}  {_cell(data.get(key), 100)}")


def event_line(frame: dict[str, Any]) -> str:
    body = frame.get("body") or {}
    kind = frame.get("kind", "")
    if kind == "output":
        text = str(body.get("data", "")).rstrip("\n")
    elif isinstance(body, dict) and "text" in body:
        who = f"[{body['channel']}] " if body.get("channel") else ""
        text = f"{who}{body['text']}"
    else:
        text = json.dumps(body, sort_keys=True)
    return f"{frame.get('seq'):>6} {kind:<12} {text}"
