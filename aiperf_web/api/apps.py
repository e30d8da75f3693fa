from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "aiperf_web.api"
    label = "api"
