from django.apps import AppConfig


class SweepsConfig(AppConfig):
    name = "aiperf_web.sweeps"
    label = "sweeps"

    def ready(self) -> None:
        # A point's run that ends moves its sweep on (sweeps/services.py: sweep_advance).
        from aiperf_web.runs.signals import run_ended
        from aiperf_web.sweeps.services import sweep_on_run_ended

        run_ended.connect(sweep_on_run_ended, dispatch_uid="sweeps.advance")
        # Each announced change nudges the sweep page's sockets (sweeps/publisher.py).
        from aiperf_web.sweeps.publisher import on_sweep_changed
        from aiperf_web.sweeps.signals import sweep_changed

        sweep_changed.connect(on_sweep_changed, dispatch_uid="sweeps.live")
