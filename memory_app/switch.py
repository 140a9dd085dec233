"""Whether operator memory is served: the environment kill switch, the runtime switch, and the scope.

Either switch turns memory off for every operator at once. The runtime switch lives in the database and
is read on every request, so flipping it needs no restart or deploy (seed 002, "Rollback").
"""

from __future__ import annotations

from typing import Literal

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from tess_site.scope import Role, Scope

from .errors import loud
from .models import MemorySwitch

MemoryScope = Literal["profile", "session"]


@loud
def memory_enabled() -> bool:
    """Both switches on. A database error is loud (``Unavailable``), never a silent "off"."""
    if not settings.TESS_OPERATOR_MEMORY:
        return False
    enabled = MemorySwitch.objects.filter(pk=1).values_list("enabled", flat=True).first()
    return enabled is None or enabled


def memory_served(scope: Scope) -> bool:
    """Memory is served to an operator (a person with the operator role) while both switches are on."""
    return scope.actor is not None and scope.has_role(Role.OPERATOR) and memory_enabled()


def memory_scope_for(scope: Scope) -> MemoryScope:
    """The honest scope for the drawer chip: ``profile`` when memory is served, ``session`` otherwise."""
    return "profile" if memory_served(scope) else "session"


def memory_switch_set(*, enabled: bool, changed_by: str) -> MemorySwitch:
    """Flip the runtime switch (the command and the admin). Takes effect on the next request."""
    with transaction.atomic():
        switch, _ = MemorySwitch.objects.update_or_create(
            pk=1, defaults={"enabled": enabled, "changed_at": timezone.now(), "changed_by": changed_by[:150]}
        )
    return switch
