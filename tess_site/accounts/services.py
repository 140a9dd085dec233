"""Writes of identity and tenancy: provisioning tenants and users, making and revoking tokens."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from functools import cache

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from tess_site import rows
from tess_site.audit.services import record_audit
from tess_site.errors import Conflict, Forbidden, InvalidInput
from tess_site.scope import Channel, Role, Scope

from . import tokens
from .models import ExternalIdentity, Membership, PersonalToken, Tenant
from .selectors import roles_for

# Touching last_used_at on every request would turn every read into a write; once a minute is honest enough.
LAST_USED_GRANULARITY = timedelta(minutes=1)


def tenant_create(*, slug: str, name: str | None = None) -> Tenant:
    tenant = Tenant(slug=slug, name=name or slug)
    tenant.full_clean()
    try:
        tenant.save()
    except IntegrityError as exc:
        raise Conflict(f"tenant {slug!r} already exists") from exc
    return tenant


def membership_grant(*, tenant: Tenant, user: User, role: Role) -> Membership:
    membership, _ = Membership.objects.get_or_create(tenant=tenant, user=user, role=role.value)
    return membership


def user_ensure(*, username: str, password: str | None = None, staff: bool = True) -> tuple[User, bool]:
    """Return ``(user, created)``. A new user gets ``password`` or an unusable one.

    Staff status lets a person reach the Django admin, where the drawer lives; what they see there is
    still decided by tenant roles.
    """
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(username=username, defaults={"is_staff": staff})
    if created:
        if password:
            user.set_password(password)
        else:
            user.set_unusable_password()
        user.save()
    return user, created


@dataclass(frozen=True)
class IssuedToken:
    token: PersonalToken
    plaintext: str  # shown once, never stored


def token_issue(*, scope: Scope, name: str, days: int | None = None, holder: User | None = None) -> IssuedToken:
    """Make a personal token in the scope's tenant for ``holder`` (default: the scope's actor).

    Making a token for someone else needs the admin role (or a system scope, for provisioning), and the
    holder must be a member of the tenant: a token never grants more than its holder's memberships.
    """
    holder = holder or scope.actor
    if holder is None:
        raise InvalidInput("system scopes cannot hold tokens")
    if holder != scope.actor and not (scope.channel is Channel.SYSTEM or scope.has_role(Role.ADMIN)):
        raise Forbidden("Only a tenant admin can make a token for someone else.")
    if not Membership.objects.filter(tenant=scope.tenant, user=holder).exists():
        raise InvalidInput("only members of the tenant can hold its tokens")
    lifetime = days or settings.TESS_TOKEN_DEFAULT_DAYS
    if not 1 <= lifetime <= 366:
        raise InvalidInput("a token lives between 1 and 366 days", details={"fields": {"days": "1..366"}})
    prefix, plaintext = tokens.generate()
    with transaction.atomic():
        token = PersonalToken.objects.create(
            tenant=scope.tenant,
            user=holder,
            name=name[:100] or "token",
            prefix=prefix,
            token_hash=tokens.digest(plaintext),
            expires_at=timezone.now() + timedelta(days=lifetime),
        )
        record_audit(
            scope,
            action="token.issue",
            target_type="token",
            target_id=str(token.pk),
            outcome="ok",
            metadata={"holder_id": holder.pk, "days": lifetime},
        )
    return IssuedToken(token=token, plaintext=plaintext)


def token_revoke(*, scope: Scope, token: PersonalToken) -> bool:
    """Revoke ``token``; returns False if it was already revoked. Idempotent."""
    with transaction.atomic():
        changed = PersonalToken.objects.filter(pk=token.pk, revoked_at=None).update(revoked_at=timezone.now())
        record_audit(
            scope,
            action="token.revoke",
            target_type="token",
            target_id=str(token.pk),
            outcome="ok" if changed else "noop",
        )
    return bool(changed)


def token_authenticate(*, plaintext: str) -> PersonalToken | None:
    """The usable token ``plaintext`` names, with its user and tenant; ``None`` for anything else."""
    found = token_authenticate_with_roles(plaintext=plaintext)
    return found[0] if found is not None else None


def token_authenticate_with_roles(*, plaintext: str) -> tuple[PersonalToken, frozenset[Role]] | None:
    """``token_authenticate``, plus the user's roles in the token's tenant read in the same query.

    For one request only (the API's authentication hands them to that request's Scope): a connection that
    lives on, such as a websocket, reads roles again whenever it re-derives its Scope.
    """
    prefix = tokens.parse_prefix(plaintext)
    if prefix is None:
        return None
    found = _token_by_prefix(prefix)
    if found is None:
        return None
    token, roles = found
    if not tokens.matches(plaintext, token.token_hash):
        return None
    now = timezone.now()
    if not token.is_usable(now) or not token.user.is_active:
        return None
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_GRANULARITY:
        PersonalToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token, roles


@cache
def _token_sql() -> str:
    user_model = get_user_model()
    return f"""
        SELECT {rows.columns(PersonalToken, "t")}, {rows.columns(user_model, "u")}, {rows.columns(Tenant, "n")}, m.role
          FROM {PersonalToken._meta.db_table} t
          JOIN {user_model._meta.db_table} u ON u.id = t.user_id
          JOIN {Tenant._meta.db_table} n ON n.id = t.tenant_id
          LEFT JOIN {Membership._meta.db_table} m ON m.user_id = t.user_id AND m.tenant_id = t.tenant_id
         WHERE t.prefix = %s
    """  # noqa: S608 (table and column names are the models')


def _token_by_prefix(prefix: str) -> tuple[PersonalToken, frozenset[Role]] | None:
    """The token with ``prefix``, its user and tenant, and the user's roles there: one round trip on
    PostgreSQL (one row per role), where every API request makes this read."""
    if connection.vendor != "postgresql":
        token = PersonalToken.objects.select_related("user", "tenant").filter(prefix=prefix).first()
        return (token, roles_for(user=token.user, tenant=token.tenant)) if token is not None else None
    with rows.hot_cursor() as cursor:
        cursor.execute(_token_sql(), [prefix])
        found = cursor.fetchall()
    if not found:
        return None
    user_model = get_user_model()
    first, user_at, tenant_at = found[0], rows.width(PersonalToken), rows.width(PersonalToken) + rows.width(user_model)
    token = rows.instance(PersonalToken, first[:user_at])
    token.user = rows.instance(user_model, first[user_at:tenant_at])
    token.tenant = rows.instance(Tenant, first[tenant_at:-1])
    return token, frozenset(Role(row[-1]) for row in found if row[-1] is not None)


def identity_link(*, scope: Scope, provider: str, external_id: str) -> ExternalIdentity:
    """Link an external identity to the scope's actor."""
    if scope.actor is None:
        raise InvalidInput("system scopes cannot link identities")
    try:
        with transaction.atomic():
            link = ExternalIdentity.objects.create(
                tenant=scope.tenant, user=scope.actor, provider=provider, external_id=external_id
            )
            record_audit(
                scope, action="identity.link", target_type="external_identity", target_id=str(link.pk), outcome="ok"
            )
    except IntegrityError as exc:
        raise Conflict("that identity is already linked in this tenant") from exc
    return link


def system_scope(*, tenant: Tenant, correlation_id: str) -> Scope:
    """A scope for work Tess does by itself (provisioning commands, sweepers)."""
    return Scope(tenant=tenant, actor=None, channel=Channel.SYSTEM, correlation_id=correlation_id)
