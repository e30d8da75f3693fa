from django.apps import AppConfig


class EndpointsConfig(AppConfig):
    name = "aiperf_web.endpoints"
    label = "endpoints"
