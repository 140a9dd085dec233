"""Failed sign-in attempts, counted per client address and per username, for every door that takes a password.

The admin sign-in page and the API's token exchange share these counters' rule: once ``limit`` attempts failed
within ``window`` seconds for an address or for a username, further attempts there wait, even with the right
password. Counting per username stops guessing spread over many addresses; per address stops one client trying
many usernames. Usernames are hashed so what people type never sits in the cache in clear text.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.core.cache import cache

_PERIODS = {"s": 1, "sec": 1, "min": 60, "hour": 3600}


def parse_rate(rate: str) -> tuple[int, int]:
    """``"10/min"`` → (10, 60)."""
    count, _, period = rate.partition("/")
    return int(count), _PERIODS[period]


@dataclass(frozen=True)
class FailureLimit:
    door: str  # which sign-in path the counters belong to
    rate: str

    def _keys(self, address: str, username: str) -> list[str]:
        digest = hashlib.sha256(username.strip().casefold().encode()).hexdigest()[:32]
        return [f"tess:{self.door}-fail:addr:{address}", f"tess:{self.door}-fail:user:{digest}"]

    @property
    def window(self) -> int:
        return parse_rate(self.rate)[1]

    def blocked(self, *, address: str, username: str) -> bool:
        limit, _ = parse_rate(self.rate)
        return any(cache.get(key, 0) >= limit for key in self._keys(address, username))

    def record_failure(self, *, address: str, username: str) -> None:
        for key in self._keys(address, username):
            cache.add(key, 0, self.window)
            try:
                cache.incr(key)
            except ValueError:  # expired between add and incr
                cache.set(key, 1, self.window)
