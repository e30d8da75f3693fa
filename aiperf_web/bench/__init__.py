"""Benchmarks of the web side, out of the product apps: `manage.py bench_web` (record
persistence, queued -> running, the run list, the assembled service, database connections
under a burst) and `manage.py bench_live` (the live dashboard in a real browser). They print
figures and never judge them. Top layer beside the stack: they assemble what they measure;
no app imports them (tests/web/test_ops.py uses `burst`)."""
