"""Identity and tenancy. Everything in Tess belongs to exactly one tenant."""

from __future__ import annotations

import zoneinfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

from tess_site.scope import Role

slug_validator = RegexValidator(r"^[a-z0-9][a-z0-9-]{0,62}$", "Use lowercase letters, digits and dashes.")


def validate_time_zone(value: str) -> None:
    """An IANA time zone name this Python knows (``Europe/Berlin``), nothing else."""
    if value not in zoneinfo.available_timezones():
        raise ValidationError(f"{value!r} is not an IANA time zone name such as Europe/Berlin.")


class Tenant(models.Model):
    """An organisation using Tess. Tenants never see each other's objects."""

    slug = models.CharField(max_length=63, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    # Where the tenant's days, weeks and months begin: the boundaries its budgets roll over at.
    time_zone = models.CharField(max_length=64, default="UTC", validators=[validate_time_zone])

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    """One role of one user in one tenant. A user may hold several roles in several tenants."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tess_memberships")
    role = models.CharField(max_length=16, choices=[(r.value, r.value) for r in Role])
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "user", "role"], name="membership_unique_role")]
        indexes = [models.Index(fields=["user", "tenant"])]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} in {self.tenant}"


class PersonalToken(models.Model):
    """A personal access token for the API and CLI, bound to one user in one tenant.

    Only ``prefix`` (to find the row) and the SHA-256 of the whole token are stored; the token itself is
    shown once, when it is made.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="tokens")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tess_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=8, unique=True)
    token_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} (tess_{self.prefix}_…)"

    def is_usable(self, now: object | None = None) -> bool:
        moment = now or timezone.now()
        return self.revoked_at is None and self.expires_at > moment  # type: ignore[operator]


class ExternalIdentity(models.Model):
    """A verified link between an identity elsewhere (a Discord user id) and a Tess user in a tenant."""

    class Provider(models.TextChoices):
        DISCORD = "discord", "Discord"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="external_identities")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tess_identities")
    provider = models.CharField(max_length=16, choices=Provider.choices)
    external_id = models.CharField(max_length=64)
    linked_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "external identities"
        constraints = [
            models.UniqueConstraint(fields=["tenant", "provider", "external_id"], name="external_identity_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.provider}:{self.external_id} → {self.user}"
