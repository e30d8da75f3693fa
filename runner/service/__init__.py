"""The web service's command line (`python -m runner service ...`, parsed in
runner/cli/service.py): a pure HTTP client of the service's API at /api/v1, on httpx. It never
imports Django or the service's code: what it knows of the service is the API's JSON
(shapes.py), so it runs wherever the engine's command line does, against any server."""
