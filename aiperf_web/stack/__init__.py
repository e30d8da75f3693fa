"""The whole service as one process tree, above every app: `manage.py serve` (migrate, the demo
objects, the built-in mock cluster, a real Dynamo on CPU when asked, the Celery worker, then
uvicorn), `manage.py bootstrap`, the embedded worker thread of the default shape, and
`manage.py bench_web`, which measures that assembly. Apps never import it."""
