"""Settings of the cluster's child processes (ASGI nodes, workers, beat): the test settings, with tasks sent
to the broker. The suite's own process keeps running tasks eagerly; these processes are the deployment."""

from tess_site.settings.test import *  # noqa: F403

CELERY_TASK_ALWAYS_EAGER = False
