"""manage.py tess_memory_switch off|on|status: the runtime kill switch of operator memory, no restart needed."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from memory_app.models import MemorySwitch
from memory_app.switch import memory_switch_set


class Command(BaseCommand):
    help = "Turn operator memory off or on for every operator at once, or show its state."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("state", choices=["off", "on", "status"])

    def handle(self, *args: Any, **options: Any) -> None:
        if options["state"] != "status":
            memory_switch_set(enabled=options["state"] == "on", changed_by="manage.py tess_memory_switch")
        switch = MemorySwitch.objects.filter(pk=1).first()
        runtime = "on" if switch is None or switch.enabled else "off"
        env = "on" if settings.TESS_OPERATOR_MEMORY else "off"
        served = "on" if runtime == env == "on" else "off"
        self.stdout.write(f"operator memory: {served} (runtime switch {runtime}, TESS_OPERATOR_MEMORY {env})")
