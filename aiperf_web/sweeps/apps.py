from django.apps import AppConfig


class SweepsConfig(AppConfig):
    name = "aiperf_web.sweeps"
    label = "sweeps"
