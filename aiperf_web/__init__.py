"""aiperf-web: the Django project and the container of its apps.

The Celery app is imported here so that `celery -A aiperf_web worker` finds it and shared
tasks bind to it.
"""

from aiperf_web.celery import app as celery_app

__all__ = ["celery_app"]
