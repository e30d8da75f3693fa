"""The whole service as one process tree, above every app: `manage.py serve` (migrate, the demo
objects, the built-in mock cluster, a real Dynamo on CPU when asked, the Celery worker, then
uvicorn), `manage.py bootstrap` and the embedded worker thread of the default shape. Apps
never import it; the benchmarks that measure it live beside it in aiperf_web/bench."""
