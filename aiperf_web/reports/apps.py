from django.apps import AppConfig


class ReportsConfig(AppConfig):
    name = "aiperf_web.reports"
    label = "reports"

    def ready(self) -> None:
        # The run-end webhooks state reports' verdict: runs announces the end, reports sends.
        from aiperf_web.reports.webhooks import run_webhooks_on_end
        from aiperf_web.runs.signals import run_ended

        run_ended.connect(run_webhooks_on_end, dispatch_uid="reports.run_webhooks")
