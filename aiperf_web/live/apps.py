from django.apps import AppConfig


class LiveConfig(AppConfig):
    name = "aiperf_web.live"
    label = "live"
