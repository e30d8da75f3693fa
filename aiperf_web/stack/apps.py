from django.apps import AppConfig


class StackConfig(AppConfig):
    name = "aiperf_web.stack"
    label = "stack"
