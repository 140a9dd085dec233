"""Rows the tests build again and again, as factory-boy factories.

``SessionFactory.create(owner=..., tenant=...)`` is a session row bound to a runtime that answers nothing: the
provider instance ``nowhere`` (a tmux instance the test settings configure, whose server never runs; pass
``provider_instance`` for a real or named one) and a fresh runtime id.
Tests that need a runtime start one through the services instead.
"""

from __future__ import annotations

import uuid

import factory

from sessions_app.models import Session


class SessionFactory(factory.django.DjangoModelFactory[Session]):
    """A session row of ``owner`` in ``tenant`` (both required; usually from the ``cast`` fixture)."""

    class Meta:
        model = Session

    title = "work"
    provider_instance = "nowhere"
    runtime_id = factory.LazyFunction(lambda: f"${uuid.uuid4().hex[:8]}")
