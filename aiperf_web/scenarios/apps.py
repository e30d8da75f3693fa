from django.apps import AppConfig


class ScenariosConfig(AppConfig):
    name = "aiperf_web.scenarios"
    label = "scenarios"
