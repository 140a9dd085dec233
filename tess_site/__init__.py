"""Tess: the operator console for a fleet of AI coding agents."""

from .celery import app as celery_app

__all__ = ["celery_app"]
