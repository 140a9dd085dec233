from django.apps import AppConfig


class MemoryConfig(AppConfig):
    """Operator memory, the operational memory plugin, and reviewed coding memory."""

    name = "memory_app"
    verbose_name = "Memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from approvals_app.cards import register_card_handler

        from .cards import MemoryCardHandler
        from .refs import register_reference_resolver
        from .resolvers import audit_readable, audit_readable_many
        from .services import CARD_KIND

        register_card_handler(CARD_KIND, MemoryCardHandler())
        register_reference_resolver("audit", audit_readable, many=audit_readable_many)

        from .coding import tasks as coding_tasks  # noqa: F401  (registers the ingestion task with Celery)
        from .plugin.orm import OrmAdapter
        from .plugin.plastmem import PlastMemAdapter
        from .plugin.registry import register_operator_memory_adapter

        register_operator_memory_adapter(OrmAdapter.kind, OrmAdapter)
        register_operator_memory_adapter(PlastMemAdapter.kind, PlastMemAdapter)
