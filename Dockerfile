# aiperf-web: the web service (uvicorn: HTTP + WebSocket), its Celery worker and the engine's
# CLI (`python -m runner ...`, e.g. the mock cluster) in one image; docker-compose.yml picks the
# command per service.
FROM python:3.11.14-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    AIPERF_DATA_DIR=/data \
    AIPERF_STATIC_ROOT=/app/staticfiles \
    AIPERF_STATIC_COLLECTED=1

WORKDIR /app
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt

COPY manage.py ./
COPY runner ./runner
COPY docs ./docs
COPY aiperf_web ./aiperf_web
COPY templates ./templates
COPY static ./static

# An unprivileged user owning only the data directory; static files are collected at build
# time (a throwaway key: collectstatic signs nothing).
RUN useradd --create-home --uid 10001 aiperf \
    && mkdir -p /data \
    && SECRET_KEY=collectstatic-only AIPERF_DATA_DIR=/tmp/build python manage.py collectstatic --noinput -v0 \
    && rm -rf /tmp/build \
    && chown -R aiperf /data
USER aiperf

EXPOSE 8000
CMD ["python", "manage.py", "serve", "--host", "0.0.0.0", "--port", "8000", \
     "--no-migrate", "--no-bootstrap", "--no-mock", "--no-worker"]
