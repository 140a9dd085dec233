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
"""

from __future__ import annotations

from django.db import connection


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
