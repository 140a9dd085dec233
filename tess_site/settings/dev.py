"""Developer and embedded default settings: ``make run`` on a fresh machine."""

from .base import *  # noqa: F403
from .env import env_bool

DEBUG = env_bool("DEBUG", True)
