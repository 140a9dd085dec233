"""Shared by the benchmark modules: timing and the row every figure is printed as."""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))


@dataclass(frozen=True)
class Row:
    """One figure: ``value`` measured beside ``baseline`` in the same run (same unit)."""

    name: str
    baseline_name: str
    baseline: float
    value: float
    unit: str = "µs"
    # The target, when the figure has one: the ratio at most (a cost) or at least (a throughput).
    at_most: float | None = None
    at_least: float | None = None

    @property
    def ratio(self) -> float:
        return self.value / self.baseline if self.baseline else float("inf")

    @property
    def verdict(self) -> str:
        """``<= 3.00x PASS``, ``>= 0.40x MISS``, or nothing for a figure without a target."""
        if self.at_most is not None:
            return f"<={self.at_most:.2f}x {'PASS' if self.ratio <= self.at_most else 'MISS'}"
        if self.at_least is not None:
            return f">={self.at_least:.2f}x {'PASS' if self.ratio >= self.at_least else 'MISS'}"
        return ""


def per_op_us(fn: Callable[[], object], n: int) -> float:
    """Median over ROUNDS of the mean time of one call, in microseconds."""
    samples = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - started) / n * 1e6)
    return statistics.median(samples)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def as_elsewhere(call: Callable[[], T]) -> T:
    """``call()`` in a thread of its own at the lowest CPU priority (nice 19), for a load generator that stands
    for machines elsewhere (operators' laptops, a model provider): on this machine it shares the servers' cores,
    and at normal priority it would take CPU the servers under test would have had. Only that thread (and the
    threads it starts) is lowered; the servers this process starts keep their own priority."""
    with ThreadPoolExecutor(1, thread_name_prefix="load-generator", initializer=_lowest_priority) as pool:
        return pool.submit(call).result()


def _lowest_priority() -> None:
    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
