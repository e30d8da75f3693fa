from django.apps import AppConfig


class BenchConfig(AppConfig):
    name = "aiperf_web.bench"
    label = "bench"
