"""Wake-ups for this app's delivery tasks, queued by task name after commit.

The services that queue deliveries cannot import ``tasks.py``: the tasks import the services they run.
They name the task instead; importing ``tasks.py`` at start-up (a Celery worker's autodiscovery, the
embedded pump in a serving process) registers these names with Celery.
"""

from __future__ import annotations

from celery import current_app

from tess_site.tasks import enqueue_on_commit

DELIVER_INBOX_ITEM = "sessions_app.tasks.deliver_inbox_item"
DELIVER_OUTBOX_ITEM = "sessions_app.tasks.deliver_outbox_item"
DELIVER_CAPTURE_ITEM = "sessions_app.tasks.deliver_capture_item"
RUN_APPROVED_TURN = "sessions_app.tasks.run_approved_turn"


def wake_on_commit(task_name: str, *args: object) -> None:
    """Queue the task named ``task_name`` with ``args`` (ids) once the current transaction commits.

    The name is looked up now, so a process whose start-up did not register the task fails here, loudly,
    instead of sending a message nobody in it would run.
    """
    enqueue_on_commit(current_app.tasks[task_name], *args)
