from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    """Authority policy, confirm cards, approval requests, Mos hand-offs, and the audit feed."""

    name = "approvals_app"
    verbose_name = "Approvals and audit"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from tess_site.audit_port import register_audit_recorder

        from .services import record_audit

        register_audit_recorder(record_audit)

        from tess_site.leases import register_leased_work

        from .executions import wake_execution
        from .models import ApprovalExecution

        register_leased_work(ApprovalExecution, wake_execution)

        from tess_site.metrics import register_scrape_collector

        from .approvals import register_approval_observer
        from .metrics import collect_pending, count_transition

        register_approval_observer(count_transition)
        register_scrape_collector("approvals", collect_pending)
