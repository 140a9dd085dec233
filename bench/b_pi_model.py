"""What running a turn through pi costs: the ``pi`` model adapter beside ``openai_compatible``, same stand-in.

Both adapters answer ``BENCH_PI_TURNS`` (10) turns of one conversation against the local chat-completions
stand-in over HTTP (``tests/providers_app/chat_standin.py``, streamed, answering at once), each turn carrying
the ones before it. Measured per turn: the time to the first delta and to the whole reply, p50 and p95, with
the session's pi process kept between turns (as by default) and with a process per turn
(``TESS_PI_KEEP_SECONDS=0``), whose difference is pi's start. No target, figures to watch. Without an
installed pi (``tests/providers_app/install_pi.sh``) there is no row.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from bench.common import Row, percentile
from providers_app.model_adapters import ModelAdapter, ModelRequest, OpenAICompatibleAdapter, Prompt
from providers_app.pi_model import PiModelAdapter, pi_processes_close
from tests.providers_app.chat_standin import ChatStandIn

TURNS = int(os.environ.get("BENCH_PI_TURNS", "10"))
PI = Path(__file__).resolve().parents[1] / "var" / "node" / "node_modules" / ".bin" / "pi"
LIVE_TEXT = '## Live state (authoritative, read this turn)\n{"session": {"status": "running"}}'


def _turns(adapter: ModelAdapter) -> tuple[list[float], list[float]]:
    """Milliseconds to the first delta and to the reply, per turn of one growing conversation."""
    session_id = str(uuid.uuid4())
    conversation: tuple[dict[str, str], ...] = ()
    firsts: list[float] = []
    wholes: list[float] = []
    for n in range(TURNS):
        text = f"what changed since step {n}?"
        marks: list[float] = []

        def on_delta(_piece: str, marks: list[float] = marks) -> None:
            marks.append(time.perf_counter())

        prompt = Prompt(stable_prefix="You are Tess.", dynamic=LIVE_TEXT, user_text=text, conversation=conversation)
        started = time.perf_counter()
        reply = adapter.complete(
            ModelRequest(prompt=prompt, intent="conversation", live={"session": {"id": session_id}}, on_delta=on_delta)
        )
        wholes.append((time.perf_counter() - started) * 1000)
        firsts.append((marks[0] - started) * 1000)
        conversation = (*conversation, {"role": "user", "content": text}, {"role": "assistant", "content": reply.text})
    return firsts, wholes


def run() -> list[Row]:
    if not os.access(PI, os.X_OK):
        print(f"b_pi_model: no pi at {PI} (bash tests/providers_app/install_pi.sh); skipped")
        return []
    standin = ChatStandIn().start()
    root = Path(tempfile.mkdtemp(prefix="bench-pi-model-"))
    try:
        direct = OpenAICompatibleAdapter(
            base_url=standin.base_url,
            api_key="sk-bench",
            model="gpt-5.6-sol",
            reasoning_effort="high",
            timeout=120.0,
            stream=True,
        )
        measured = {"openai_compatible": _turns(direct)}
        for label, keep_seconds in (("pi, kept", 600.0), ("pi, per turn", 0.0)):
            pi = PiModelAdapter(
                executable=[str(PI)],
                root=root,
                base_url=standin.base_url,
                api_key="sk-bench",
                model="gpt-5.6-sol",
                reasoning_effort="high",
                timeout=120.0,
                context_tokens=272_000,
                keep_seconds=keep_seconds,
                keep_max=4,
            )
            measured[label] = _turns(pi)
    finally:
        pi_processes_close()
        standin.stop()
        shutil.rmtree(root, ignore_errors=True)
    rows = []
    direct_first, direct_whole = measured["openai_compatible"]
    for label in ("pi, kept", "pi, per turn"):
        first, whole = measured[label]
        for q, name in ((0.5, "p50"), (0.95, "p95")):
            baseline = f"openai_compatible {name}"
            rows.append(
                Row(
                    f"{label}: first delta {name}",
                    baseline,
                    percentile(direct_first, q),
                    percentile(first, q),
                    unit="ms",
                )
            )
            rows.append(
                Row(
                    f"{label}: whole turn {name}",
                    baseline,
                    percentile(direct_whole, q),
                    percentile(whole, q),
                    unit="ms",
                )
            )
    return rows
