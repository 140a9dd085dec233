"""The Scope: who is acting, for which tenant, through which channel — derived only from a verified credential.

Services take a Scope and nothing else that names a person or a tenant; no view, consumer or task builds
one from client input. See DESIGN.md, "Identity and scope".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class ScopeTenant(Protocol):
    """What a Scope's tenant offers to code that holds only the Scope: its primary key and its slug.

    The tenant is a ``tess_site.accounts.models.Tenant``. accounts builds Scopes from credentials, so the
    Scope names only this shape and imports nothing of accounts; a bare ``Scope`` annotation leaves the
    tenant's precise type to the caller (the ORM wants the model itself in lookups and foreign keys).
    """

    @property
    def pk(self) -> int: ...

    @property
    def slug(self) -> str: ...


TenantT = TypeVar("TenantT", bound=ScopeTenant)


class Channel(StrEnum):
    WEB = "web"
    CLI = "cli"
    DISCORD = "discord"
    SYSTEM = "system"


class Role(StrEnum):
    OPERATOR = "operator"
    APPROVER = "approver"
    AUDITOR = "auditor"
    ADMIN = "admin"


@dataclass(frozen=True, slots=True)
class Scope(Generic[TenantT]):
    """Immutable, server-derived identity of one action.

    ``actor`` is ``None`` only for system work (sweepers, migrations) with ``channel=SYSTEM``.
    ``roles`` are the actor's roles in ``tenant`` at the moment the credential was verified.
    """

    tenant: TenantT
    actor: User | None
    channel: Channel
    correlation_id: str
    session: str | None = None
    roles: frozenset[Role] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.actor is None and self.channel is not Channel.SYSTEM:
            raise ValueError("only system scopes may have no actor")

    def has_role(self, *roles: Role) -> bool:
        return any(role in self.roles for role in roles)

    def for_session(self, session_id: str) -> Scope[TenantT]:
        """The same identity, narrowed to one Tess session."""
        return Scope(
            tenant=self.tenant,
            actor=self.actor,
            channel=self.channel,
            correlation_id=self.correlation_id,
            session=session_id,
            roles=self.roles,
        )

    def with_tenant(self, tenant: TenantT, roles: frozenset[Role]) -> Scope[TenantT]:
        """The same actor in another tenant, after the caller verified the membership behind ``roles``."""
        return Scope(
            tenant=tenant,
            actor=self.actor,
            channel=self.channel,
            correlation_id=self.correlation_id,
            roles=roles,
        )

    @property
    def actor_label(self) -> str:
        return self.actor.get_username() if self.actor is not None else "system"
