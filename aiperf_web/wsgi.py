"""WSGI entry point, for servers without WebSocket; `manage.py serve` uses ASGI."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aiperf_web.settings")

application = get_wsgi_application()
