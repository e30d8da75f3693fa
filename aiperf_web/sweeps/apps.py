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
        # Every worker moves on, periodically, the sweeps no run's end moved on
        # (sweeps/pickup.py), beside the runs' stale-run reaper.
        from celery.signals import worker_ready

        from aiperf_web.sweeps.pickup import start_sweep_pickup

        worker_ready.connect(start_sweep_pickup, dispatch_uid="sweeps.pickup")
