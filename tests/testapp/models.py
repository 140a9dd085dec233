"""A concrete table of durable work, so the lease mechanism is tested against a real table."""

from django.db import models

from tess_site.leases import LeasedWork


class Chore(LeasedWork):
    """A unit of test work; ``effects`` counts how often its effect was applied."""

    label = models.CharField(max_length=50)
    effects = models.PositiveIntegerField(default=0)
