"""Production settings: ``base`` plus what ``production.production_settings`` derives from the environment,
which refuses to start, naming everything that is missing, rather than run half-configured."""

import os

from .base import *  # noqa: F403
from .production import production_settings

globals().update(production_settings(os.environ))
LOGGING["handlers"]["console"]["formatter"] = "json"  # type: ignore[index]  # noqa: F405
