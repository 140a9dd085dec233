"""What the audit feed registers with the rest of the base at start-up: the ``audit:<seq>`` reference resolver."""

from __future__ import annotations

from tess_site.refs import register_reference_resolver

from .resolvers import audit_readable, audit_readable_many


def connect() -> None:
    register_reference_resolver("audit", audit_readable, many=audit_readable_many)
