from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "aiperf_web.core"
    label = "core"
