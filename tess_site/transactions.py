"""Giving a request's database connection back while it waits on something slow (a model, a provider).

Between two short transactions a request holds no lock and no transaction, but its thread still holds a
database connection. ``connection_release`` hands it back when that helps someone else:

- with Django's connection pool (``OPTIONS["pool"]``, psycopg's ``ConnectionPool``), ``close()`` returns the
  connection to the pool, so another request's thread can borrow it; the next query borrows one again;
- without a pool and without persistent connections (``CONN_MAX_AGE`` 0), ``close()`` ends the server
  connection now instead of at the end of the request;
- with persistent connections (``CONN_MAX_AGE`` above 0) the connection belongs to the thread anyway and is
  kept: closing it would only cost a new connection for the next step.

Inside a transaction (a caller's, or a test's) nothing is released: the transaction is still needed.

``commit_without_flush_wait`` is for the transactions that only mark a request as in flight (an idempotency
key, a turn's running record) before a step that writes its outcome. On PostgreSQL their commit then returns
before the write-ahead log reaches the disk (``synchronous_commit = off`` for that transaction only): about
3.5 ms less per mark on this machine's disk (the README's "Serving a fleet"). Only a crash of the database
server itself, within a fraction of a second, can lose such a mark, and then the request it marked had
not answered, its outcome not been written, and it may be sent again as if never received: the outcome's
own commit waits for the log as usual, and that wait covers every earlier commit too, so an answered request
never loses its marks.
"""

from __future__ import annotations

from django.db import connection


def commit_without_flush_wait() -> None:
    """In an atomic block: let this transaction's commit return before its log is flushed (see above)."""
    assert connection.in_atomic_block, "only for the transaction being written"
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = off")


def connection_pooled() -> bool:
    return bool(connection.settings_dict.get("OPTIONS", {}).get("pool"))


def connection_release() -> bool:
    """Give the request's connection back if no transaction needs it (see the module docstring). Returns
    whether it was given back."""
    if connection.in_atomic_block or connection.connection is None:
        return False
    if connection_pooled() or connection.settings_dict.get("CONN_MAX_AGE") == 0:
        connection.close()
        return True
    return False
