"""Moved to aiperf_web/runs/leaks.py: the run's writer (runs/sink.py) works the verdict out once
and publishes it with each snapshot, and the writer sits in runs. This name stays only while
the modules another change is splitting (reports/selectors, reports/api.py, run_page.py,
tests/web/test_reports.py) still import it in the committed tree; delete it once none does."""

from aiperf_web.runs.leaks import *  # noqa: F403
