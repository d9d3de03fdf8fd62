"""Django settings for Troupe, driven by the environment (see .env.example).

With no variables set, Troupe runs on an embedded default: SQLite and a filesystem message
broker under TROUPE_DATA_DIR. DATABASE_URL switches to PostgreSQL and CELERY_BROKER_URL to
Redis. A bad value stops start-up with one line naming the variable (webapp/env.py).
"""

from pathlib import Path
from urllib.parse import urlsplit

from webapp import secret_key
from webapp.env import EnvError, env_bool, env_int, env_list, env_str, parse_database_url

BASE_DIR = Path(__file__).resolve().parent.parent

# Models, checkpoints, the embedded database and the embedded broker's folders live here.
DATA_DIR = Path(env_str("TROUPE_DATA_DIR", str(BASE_DIR / ".data"))).expanduser().resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = env_str("SECRET_KEY", "") or secret_key.load_or_create(DATA_DIR / "secret_key")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])

INSTALLED_APPS = [
    "webapp.accounts",
    "webapp.experiments",
    "webapp.metrics",
    "webapp.runs",
    "webapp.alerts",
    "webapp.branching",
    "webapp.stats",
    "webapp.episodes",
    "webapp.dashboards",
    "webapp.tracking",
    "webapp.attribution",
    "webapp.explorer",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "webapp.urls"
WSGI_APPLICATION = "webapp.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "webapp" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Database

DATABASE_URL = env_str("DATABASE_URL", "")
if DATABASE_URL:
    DATABASES = {"default": parse_database_url(DATABASE_URL)}
else:
    DATABASES = {
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DATA_DIR / "troupe.sqlite3"}
    }

_db = DATABASES["default"]
if _db["ENGINE"] == "django.db.backends.sqlite3":
    _db["OPTIONS"] = {
        # WAL lets the web server read while a worker writes metrics. IMMEDIATE takes the write
        # lock when a transaction starts, so a busy database makes writers wait (up to
        # `timeout` seconds) instead of failing with "database is locked" half-way through.
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
else:
    _db["CONN_MAX_AGE"] = 60
    _db["CONN_HEALTH_CHECKS"] = True
    # Fail within seconds, not minutes, when the server is down.
    _db["OPTIONS"].setdefault("connect_timeout", 5)
    # Django turns psycopg's prepared statements off (threshold None); a threshold no
    # statement reaches keeps Django's own queries unprepared, yet lets the few that ask
    # (`webapp/metrics/lookups.py`: every API request's token look-up) be prepared: planning
    # its joins cost four times running them. Behind PgBouncer in transaction mode, set it
    # to None (`prepared statement does not exist`) or use PgBouncer >= 1.21.
    _db["OPTIONS"].setdefault("prepare_threshold", 2**31 - 1)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Celery (read by webapp/celery.py through the CELERY_ namespace)

# A task that is not acknowledged within this many seconds is handed to another worker, so it
# must exceed the longest run (runs acknowledge when they finish: task_acks_late).
_visibility_timeout = env_int("CELERY_VISIBILITY_TIMEOUT", 48 * 3600, minimum=60)

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "")
if not CELERY_BROKER_URL:
    # kombu's filesystem transport: one folder of message files. A worker takes a message by
    # moving it into `processed`; store_processed keeps that folder in the data directory, so
    # the move is an atomic rename and two workers never take the same message (the default,
    # the system's temp dir, may be another file system, where a move is a copy). The cost:
    # one small file per task stays in `processed`.
    _broker = DATA_DIR / "broker"
    CELERY_BROKER_URL = "filesystem://localhost/"  # the host only silences a kombu warning
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker / "queue"),
        "data_folder_out": str(_broker / "queue"),
        "processed_folder": str(_broker / "processed"),
        "store_processed": True,
        "control_folder": str(_broker / "control"),
        "polling_interval": 0.5,
    }
    CELERY_RESULT_BACKEND = f"file://{DATA_DIR / 'results'}"
    for _folder in ("queue", "processed", "control"):
        (_broker / _folder).mkdir(parents=True, exist_ok=True)
    (DATA_DIR / "results").mkdir(exist_ok=True)
elif urlsplit(CELERY_BROKER_URL).scheme in ("redis", "rediss"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": _visibility_timeout}
    # Every Redis key (queues included) under this prefix: test sessions that share one Redis
    # keep their tasks apart (tests/conftest.py sets it per session). Unset in production.
    if _broker_prefix := env_str("TROUPE_BROKER_PREFIX", ""):
        CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"] = _broker_prefix
    CELERY_RESULT_BACKEND = CELERY_BROKER_URL
else:
    raise EnvError(
        f"CELERY_BROKER_URL={CELERY_BROKER_URL!r} is not supported: use redis://host:6379/0, "
        "or leave it unset for the embedded broker."
    )

# Authentication

# Django's ModelBackend behind the sign-in throttle (webapp/accounts/throttle.py): failures
# per account and per client address within a window; over the limit, attempts are refused
# before the password is hashed.
AUTHENTICATION_BACKENDS = ["webapp.accounts.backends.ThrottledModelBackend"]
TROUPE_LOGIN_MAX_FAILURES = env_int("TROUPE_LOGIN_MAX_FAILURES", 5, minimum=1)
TROUPE_LOGIN_ADDRESS_MAX_FAILURES = env_int("TROUPE_LOGIN_ADDRESS_MAX_FAILURES", 20, minimum=1)
TROUPE_LOGIN_WINDOW_SECONDS = env_int("TROUPE_LOGIN_WINDOW_SECONDS", 900, minimum=1)

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# Static files: served by WhiteNoise from the web process itself; nothing comes from a CDN.

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "webapp" / "static"]

# Logging: everything at WARNING and above to stderr (gunicorn's and Celery's log), so a
# server error is never silent. Django's own default sends request errors only to e-mail
# when DEBUG is off; `django.request` now reaches stderr with its traceback — its errors
# only: it logs every 4xx as a warning, and a loop of refused sign-ins or bad tokens would
# flood the log.

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["stderr"], "level": "WARNING"},
    "loggers": {
        # Django's default config gives these their own (DEBUG-only, e-mail) handlers; send
        # them through the root instead.
        "django": {"handlers": [], "level": "WARNING", "propagate": True},
        "django.server": {"handlers": [], "level": "INFO", "propagate": True},
        "django.request": {"handlers": [], "level": "ERROR", "propagate": True},
    },
}

# Runs (webapp/runs, workers)

# A running run whose heartbeat is older than this is presumed to have lost its worker: the
# sweep every worker runs (workers/sweep.py) puts it back in the queue, to resume from its last
# checkpoint. Workers beat every TROUPE_HEARTBEAT_SECONDS and sweep every TROUPE_SWEEP_SECONDS.
TROUPE_STALE_RUN_SECONDS = env_int("TROUPE_STALE_RUN_SECONDS", 120, minimum=1)
TROUPE_HEARTBEAT_SECONDS = env_int("TROUPE_HEARTBEAT_SECONDS", 10, minimum=1)
TROUPE_SWEEP_SECONDS = env_int("TROUPE_SWEEP_SECONDS", 30, minimum=1)
# A run whose worker died this many times is marked failed instead of queued again (a run
# killed for memory would otherwise kill worker after worker).
TROUPE_MAX_ATTEMPTS = env_int("TROUPE_MAX_ATTEMPTS", 3, minimum=1)
# Metric points one API request may carry; bigger bodies than DATA_UPLOAD_MAX_MEMORY_SIZE
# (Django's 2.5 MB) are refused with 413 as well.
TROUPE_API_MAX_POINTS = env_int("TROUPE_API_MAX_POINTS", 10_000, minimum=1)
# MLflow artifacts (webapp/tracking/artifacts.py): the largest file one upload may carry, and
# the most one run may hold in all; a bigger upload is refused, nothing of it kept.
TROUPE_ARTIFACT_MAX_BYTES = env_int("TROUPE_ARTIFACT_MAX_BYTES", 2 * 1024**3, minimum=1)
TROUPE_RUN_ARTIFACTS_MAX_BYTES = env_int("TROUPE_RUN_ARTIFACTS_MAX_BYTES", 20 * 1024**3, minimum=1)

# The live radar (webapp/alerts/radar.py): each confirmed event is POSTed once as JSON
# to this URL, when set, from a background thread that waits at most the timeout.
TROUPE_ALERT_WEBHOOK_URL = env_str("TROUPE_ALERT_WEBHOOK_URL", "")
TROUPE_ALERT_WEBHOOK_TIMEOUT = env_int("TROUPE_ALERT_WEBHOOK_TIMEOUT", 5, minimum=1)
# A run's radar is evaluated at most once in this many seconds per process; a batch within
# the window schedules one evaluation at its end (0: after every batch).
TROUPE_RADAR_MIN_SECONDS = env_int("TROUPE_RADAR_MIN_SECONDS", 2, minimum=0)
