# The aiperf-web engine: `python -m runner ...` (simulate, replay, mock-server, bench).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

WORKDIR /app
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt

COPY runner ./runner
COPY docs ./docs

# An unprivileged user: the engine needs no root.
RUN useradd --create-home --uid 10001 aiperf
USER aiperf

ENTRYPOINT ["python", "-m", "runner"]
CMD ["demo"]
