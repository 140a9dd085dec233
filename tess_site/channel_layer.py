"""The Redis channel layer, whose connections are shared by waiting for one, never by failing.

channels-redis gives each event loop one redis-py connection pool per Redis host. That pool (redis-py's
``ConnectionPool``) opens at most ``max_connections`` (100 by default) and raises ``MaxConnectionsError`` as
soon as a command finds them all in use. One of them is held all along by the layer's receive loop (a
blocking ``BZPOPMIN``), and every websocket that connects runs ``group_add`` (``group_discard`` when it
leaves). The stream benchmark's bare consumer, whose 100 subscribers join at the same instant, had a few
handshakes find the pool full and answered them with HTTP 500; a join or leave of Tess's own consumers
that found it full would fail the same way (a failed leave keeps the channel in its group until the group
expires). Tess's consumers read the database before they join, which spaces their joins out: 40 of them
connecting and leaving at once through 3 connections did not fill the pool.

Here the pool is redis-py's ``BlockingConnectionPool``: a command that finds every connection in use waits
for one (at most ``timeout`` seconds, then it fails as before), so a burst is served as fast as Redis
answers, with no more connections than before.
"""

from __future__ import annotations

from typing import Any

from channels_redis.core import RedisChannelLayer
from redis.asyncio import BlockingConnectionPool


class WaitingRedisChannelLayer(RedisChannelLayer):
    """``channels_redis.core.RedisChannelLayer`` with a pool that waits for a free connection.

    Each host is a dict with ``address`` (a ``redis://`` URL), ``max_connections`` (per event loop),
    ``timeout`` (seconds a command waits for a free connection) and redis-py's connection options.
    """

    def create_pool(self, index: int) -> BlockingConnectionPool:
        host: dict[str, Any] = dict(self.hosts[index])
        address = host.pop("address")
        return BlockingConnectionPool.from_url(address, **host)
