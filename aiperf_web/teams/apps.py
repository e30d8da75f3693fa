from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "aiperf_web.teams"
    label = "teams"
