"""manage.py tess_demo_session: the demo tmux sessions, bound to the demo tenant's operator.

Three sessions: ``demo`` prints a line every second; ``demo agent`` works a few seconds, then asks
``Continue? [y/N]`` and waits until someone answers (raw input), so its agent state goes working, waiting
for input, working again; ``refactor billing`` is a sample pi session file whose assistant messages carry
usage, so the board and the usage API show what an agent cost.

Idempotent: a live demo session is left alone; one whose runtime is gone (a reboot) is marked exited and
replaced. Where tmux is not installed it says how to install it and exits successfully, so ``make run``
goes on without the demo session.
"""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from providers_app.contract import ProviderError
from providers_app.pi import PiProvider
from providers_app.registry import configured_instances, get_provider
from sessions_app import services
from sessions_app.budgets import budget_save
from sessions_app.models import Budget, BudgetAction, BudgetMetric, BudgetPeriod, Session, SessionStatus
from tess_site.accounts.models import Tenant
from tess_site.accounts.selectors import roles_for
from tess_site.scope import Channel, Role, Scope

DEMO_BUDGET_USD = Decimal("0.40")  # the sample file's steps cost 0.4881 USD: past the limit
SAMPLE_PI_FILE = Path(__file__).resolve().parents[2] / "demo_data" / "pi-demo-session.jsonl"
SAMPLE_PI_ID = "0b7c1d2e-5f60-4a71-8b92-a3b4c5d6e7f8"
INSTALL_HINT = (
    "tmux is not installed, so there is no demo session. Install it (Debian/Ubuntu: sudo apt-get install tmux; "
    "Fedora: sudo dnf install tmux; macOS: brew install tmux) and run make run again."
)


class Command(BaseCommand):
    help = "Start the demo tmux session for the demo operator (idempotent); needs TESS_DEMO_SESSION=1."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--instance", default="demo", help="provider instance (default: demo)")
        parser.add_argument(
            "--agent-instance",
            default="demo-agent",
            help="provider instance of the demo agent that asks questions (default: demo-agent; '' for none)",
        )
        parser.add_argument(
            "--pi-instance", default="demo-pi", help="pi instance of the sample session file (default: demo-pi)"
        )
        parser.add_argument("--tenant", default="demo")
        parser.add_argument("--username", default="operator")

    def handle(self, *args: Any, **options: Any) -> None:
        if shutil.which("tmux") is None:
            self.stdout.write(INSTALL_HINT)
            return
        instance = options["instance"]
        if instance not in configured_instances():
            self.stdout.write(f"No provider instance {instance!r} is configured (set TESS_DEMO_SESSION=1).")
            return
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        user = get_user_model().objects.filter(username=options["username"]).first()
        if tenant is None or user is None:
            self.stdout.write("Run manage.py tess_demo first: there is no demo tenant or operator.")
            return
        scope = Scope(
            tenant=tenant,
            actor=user,
            channel=Channel.CLI,
            correlation_id="tess-demo-session",
            roles=roles_for(user=user, tenant=tenant),
        )
        self._ensure(scope, instance, "demo")
        if options["agent_instance"] in configured_instances():
            self._ensure(scope, options["agent_instance"], "demo agent")
        if options["pi_instance"] in configured_instances():
            self._ensure_pi(scope, options["pi_instance"])

    def _ensure_pi(self, scope: Scope, instance: str) -> None:
        """The sample pi session file in the instance's directory, bound to the scope's user once."""
        assert scope.actor is not None
        provider = get_provider(instance)
        assert isinstance(provider, PiProvider)
        project = provider.root / "--srv-demo-billing--"
        project.mkdir(parents=True, exist_ok=True)
        target = project / f"2026-11-27T09-00-00-000Z_{SAMPLE_PI_ID}.jsonl"
        if not target.exists():
            shutil.copyfile(SAMPLE_PI_FILE, target)
        runtime = next((r for r in provider.list_sessions(scope) if SAMPLE_PI_ID in r.ref.runtime_id), None)
        if runtime is None:
            self.stdout.write(f"The sample pi session file in {project} was not found; no pi demo session.")
            return
        bound = Session.objects.filter(
            tenant=scope.tenant,
            provider_instance=instance,
            runtime_id=runtime.ref.runtime_id,
            status=SessionStatus.RUNNING,
        ).first()
        if bound is None:
            bound = services.session_bind_started(
                scope=scope, owner=scope.actor, runtime=runtime, title="refactor billing"
            )
            self.stdout.write(
                f"Demo session {bound.pk} (refactor billing) bound to a sample pi session file with usage."
            )
        else:
            self.stdout.write(f"Demo session {bound.pk} is bound ({instance}:{bound.runtime_id}).")
        self._ensure_budget(scope, bound)

    def _ensure_budget(self, scope: Scope, session: Session) -> None:
        """A require_approval budget on the pi demo session below what its sample file cost, so the usage page
        shows a budget reached and a turn in that session becomes an approval request."""
        if Budget.objects.filter(tenant=scope.tenant, session=session).exists():
            return
        setup = Scope(
            tenant=scope.tenant,
            actor=None,
            channel=Channel.SYSTEM,
            correlation_id="tess-demo-session",
            roles=frozenset({Role.ADMIN}),
        )
        budget = Budget(
            tenant=scope.tenant,
            name="demo pi spend",
            session=session,
            period=BudgetPeriod.MONTH,
            metric=BudgetMetric.COST,
            currency="USD",
            limit=DEMO_BUDGET_USD,
            action=BudgetAction.REQUIRE_APPROVAL,
        )
        budget_save(scope=setup, budget=budget, created=True)
        self.stdout.write(f"Budget 'demo pi spend' ({DEMO_BUDGET_USD} USD a month, require_approval) on {session.pk}.")

    def _ensure(self, scope: Scope, instance: str, title: str) -> None:
        """One running session of ``instance`` for the scope's user: the live one, or a new one."""
        assert scope.actor is not None
        provider = get_provider(instance)
        try:
            live = {(r.ref.runtime_id, tuple(sorted(r.ref.identity.items()))) for r in provider.list_sessions(scope)}
        except ProviderError as exc:
            self.stdout.write(f"The {instance} tmux server cannot be reached ({exc.code}); no {title} session.")
            return
        for session in Session.objects.filter(
            tenant=scope.tenant, owner=scope.actor, provider_instance=instance, status=SessionStatus.RUNNING
        ):
            ref = session.runtime_ref
            if (ref.runtime_id, tuple(sorted(ref.identity.items()))) in live:
                self.stdout.write(f"Demo session {session.pk} is running ({instance}:{session.runtime_id}).")
                return
            services.session_mark_exited(session_id=session.pk)
        session = services.session_start(scope=scope, instance=instance, title=title)
        self.stdout.write(
            f"Demo session {session.pk} ({title}) started for {scope.actor.get_username()} "
            f"({instance}:{session.runtime_id}); its output streams at /ws/sessions/{session.pk}/stream/ and "
            f"/api/v1/sessions/{session.pk}/events/."
        )
