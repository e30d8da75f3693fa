from django.apps import AppConfig


class ReportsConfig(AppConfig):
    name = "aiperf_web.reports"
    label = "reports"
