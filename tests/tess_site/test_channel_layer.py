"""The Redis channel layer under a burst: more channels joining a group at once than it has connections.

Against real Redis. (Through daphne, Tess's stream consumers authenticate against the database before they
join their group, which spaces their joins out: 40 subscribers connecting and leaving at once through a layer
of 3 connections were all served even by channels-redis's own pool. The burst that filled it came from the
stream benchmark's bare consumer, which joins at once: ``bench/b_streams.py``.)
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from channels_redis.core import RedisChannelLayer
from django.conf import settings
from redis.exceptions import MaxConnectionsError

from tess_site.channel_layer import WaitingRedisChannelLayer

pytestmark = [pytest.mark.redis]

BURST = 40
POOL = 3


async def _burst(layer: Any) -> list[dict[str, Any]]:
    """``BURST`` channels join one group at the same instant; then one message to the group, received by each."""
    group = f"burst-{uuid.uuid4().hex[:8]}"
    channels = [await layer.new_channel() for _ in range(BURST)]
    try:
        await asyncio.gather(*(layer.group_add(group, channel) for channel in channels))
        await layer.group_send(group, {"type": "burst.hello", "n": 1})
        return list(await asyncio.wait_for(asyncio.gather(*(layer.receive(c) for c in channels)), timeout=20))
    finally:
        await layer.flush()


def _hosts(**pool: Any) -> list[dict[str, Any]]:
    return [{"address": settings.REDIS_URL, "max_connections": POOL, **pool}]


def test_a_burst_larger_than_the_pool_waits_for_connections_and_every_member_gets_the_message() -> None:
    layer = WaitingRedisChannelLayer(hosts=_hosts(timeout=10), prefix=f"tess-test-burst-{uuid.uuid4().hex[:8]}")
    received = asyncio.run(_burst(layer))
    assert received == [{"type": "burst.hello", "n": 1}] * BURST


def test_the_same_burst_fails_on_channels_redis_own_pool() -> None:
    """Why the layer exists: the stock pool raises when it is full (and this burst does fill it)."""
    layer = RedisChannelLayer(hosts=_hosts(), prefix=f"tess-test-burst-{uuid.uuid4().hex[:8]}")
    with pytest.raises(MaxConnectionsError):
        asyncio.run(_burst(layer))


def test_the_settings_use_it_with_a_bounded_wait() -> None:
    layer_settings = settings.CHANNEL_LAYERS["default"]
    assert layer_settings["BACKEND"] == "tess_site.channel_layer.WaitingRedisChannelLayer"
    (host,) = layer_settings["CONFIG"]["hosts"]
    assert host["max_connections"] == 100
    assert 0 < host["timeout"] <= 30
