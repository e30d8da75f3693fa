from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "aiperf_web.ops"
    label = "ops"
