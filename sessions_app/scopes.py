"""The scope of work Tess does on its own for a session."""

from __future__ import annotations

from tess_site.scope import Channel, Scope

from .models import Session


def system_scope(session: Session, correlation_id: str = "-") -> Scope:
    """The scope of work Tess does on its own for a session (pumping output, sweeping)."""
    return Scope(
        tenant=session.tenant,
        actor=None,
        channel=Channel.SYSTEM,
        correlation_id=correlation_id,
        session=str(session.pk),
    )
