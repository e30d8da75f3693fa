from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "aiperf_web.runs"
    label = "runs"
