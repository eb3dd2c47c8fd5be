"""Settings from the environment and ``$OFFLOAD_HOME/conf/offload.env``.

Values already in the environment win over the env file, so a cron line can
override one setting without editing the file.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from urllib.parse import quote

import sqlalchemy as sa

from gluon.env_file import OBJECT_STORE_PREFIXES, misspelt_environment, parse_env_file
from gluon.errors import ConfigError
from gluon.logs import remember_secret, secrets_of_url

ENV_FILE = Path("conf") / "offload.env"


class EngineKind(StrEnum):
    """Which Spark the lake runs on."""

    SAIL = "sail"
    REMOTE = "remote"
    CLASSIC = "classic"


@dataclass(frozen=True, slots=True)
class SourceTimeouts:
    """Bounds on every wait toward the source database, in seconds (0: no bound).

    Bulk reads are streamed in fetches, each its own statement or round trip, so the
    statement bound applies per fetch and a long offload is never cut short by it.
    """

    connect_seconds: float = 30.0
    """Connecting, including the server's first answer (GLUON_SOURCE_CONNECT_TIMEOUT)."""
    statement_seconds: float = 3600.0
    """One statement or round trip (GLUON_SOURCE_STATEMENT_TIMEOUT)."""
    lock_seconds: float = 30.0
    """Waiting for a lock the application holds (GLUON_SOURCE_LOCK_TIMEOUT); bounds how long
    application writers can queue behind gluon's DDL."""


TIMEOUT_VARIABLES = {
    "GLUON_SOURCE_CONNECT_TIMEOUT": "connect_seconds",
    "GLUON_SOURCE_STATEMENT_TIMEOUT": "statement_seconds",
    "GLUON_SOURCE_LOCK_TIMEOUT": "lock_seconds",
}
MAX_TIMEOUT_SECONDS = 1_000_000
"""The largest timeout every source takes (Oracle's DDL_LOCK_TIMEOUT; PostgreSQL's
milliseconds stop at 2^31), about 11.5 days: a larger value would pass here and fail at
the server."""

DEFAULT_MAX_RETAINED_WAL_MB = 10240.0
"""GLUON_PG_LOGICAL_MAX_RETAINED_WAL's default, in MiB: a table of a shared PG_LOGICAL slot
lagging the WAL by more is left out of the slot (it needs a rebuild), so one table that
cannot ship never makes the source keep WAL without end."""
MAX_RETAINED_WAL_VARIABLE = "GLUON_PG_LOGICAL_MAX_RETAINED_WAL"

DEFAULT_UMASK = 0o077
"""Files gluon writes (repository, lake, reports, lock files) are its user's alone unless
GLUON_UMASK says otherwise: they hold copies of source data."""


def _max_retained_wal(env: Mapping[str, str]) -> int | None:
    """GLUON_PG_LOGICAL_MAX_RETAINED_WAL (MiB) in bytes; None: no bound (0)."""
    text = env.get(MAX_RETAINED_WAL_VARIABLE) or str(DEFAULT_MAX_RETAINED_WAL_MB)
    try:
        mib = float(text)
    except ValueError:
        mib = math.nan
    if not (math.isfinite(mib) and 0 <= mib <= 2**40):
        raise ConfigError(
            f"{MAX_RETAINED_WAL_VARIABLE} must be a number of MiB from 0 to {2**40} (0 for "
            f"no bound), found {text!r}"
        )
    return int(mib * 2**20) or None


def _source_timeouts(env: Mapping[str, str]) -> SourceTimeouts:
    values: dict[str, float] = {}
    for variable, field_name in TIMEOUT_VARIABLES.items():
        text = env.get(variable)
        if not text:
            continue
        try:
            seconds = float(text)
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and 0 <= seconds <= MAX_TIMEOUT_SECONDS):
            raise ConfigError(
                f"{variable} must be a number of seconds from 0 to {MAX_TIMEOUT_SECONDS} "
                f"(0 for no limit), found {text!r}"
            )
        values[field_name] = seconds
    return SourceTimeouts(**values)


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a command needs to know about its environment."""

    offload_home: Path
    source_url: str | None
    lake_root: str
    repo_url: str
    engine: EngineKind
    spark_remote: str | None
    spark_master: str | None
    log_dir: Path
    source_timeouts: SourceTimeouts = SourceTimeouts()
    umask: int = DEFAULT_UMASK
    """The umask of gluon's writes (GLUON_UMASK)."""
    warnings: tuple[str, ...] = ()
    """What the command should say before it starts (a misspelt variable in the environment)."""
    object_store: Mapping[str, str] = field(default_factory=dict)
    """The ``AWS_*``, ``AZURE_*`` and ``GOOGLE_*`` settings (environment and env file), with
    the commit protocol gluon adds for an S3 lake (see :func:`export_object_store`)."""
    max_retained_wal: int | None = int(DEFAULT_MAX_RETAINED_WAL_MB * 2**20)
    """Bytes of WAL a table of a shared PG_LOGICAL slot may lag before it is left out of the
    slot (GLUON_PG_LOGICAL_MAX_RETAINED_WAL, MiB); None: no bound."""

    @property
    def run_dir(self) -> Path:
        """Where lock files live."""
        return self.offload_home / "run"

    def require_source_url(self) -> str:
        """Return the source URL or fail naming the variable."""
        if not self.source_url:
            raise ConfigError(
                "GLUON_SOURCE_URL is not set: set it to a SQLAlchemy URL such as "
                "sqlite:////path/app.db or postgresql+psycopg://user@host/db "
                "(for Oracle, ORA_CONN with ORA_APP_USER and ORA_APP_PASS also work)"
            )
        return self.source_url


def _umask(env: Mapping[str, str]) -> int:
    text = env.get("GLUON_UMASK")
    if not text:
        return DEFAULT_UMASK
    if not re.fullmatch(r"0?[0-7]{1,3}", text.strip()):
        raise ConfigError(
            f"GLUON_UMASK must be an octal umask such as 077 (private) or 027 (readable by "
            f"the group), found {text!r}"
        )
    return int(text.strip(), 8)


def _lake_root(env: Mapping[str, str], home: Path) -> str:
    """The lake root, which must not depend on the directory a command starts in."""
    value = env.get("OFFLOAD_LAKE_ROOT")
    if not value:
        return str(home / "lake")
    if "://" in value:
        return value
    path = Path(value).expanduser()
    if not path.is_absolute():
        raise ConfigError(
            f"OFFLOAD_LAKE_ROOT must be an absolute path or a URI such as s3://bucket/prefix, "
            f"found {value!r}: a relative path would put the lake wherever a command starts"
        )
    return str(path)


REPOSITORY_BACKENDS = ("sqlite", "postgresql", "oracle")


def _check_repo_url(url: str) -> None:
    parsed = parse_database_url(url, "GLUON_REPO_URL")
    backend = parsed.get_backend_name()
    if backend not in REPOSITORY_BACKENDS:
        raise ConfigError(
            f"GLUON_REPO_URL: a {backend} repository is not supported: use SQLite "
            "(sqlite:////abs/path/gluon.db), PostgreSQL (postgresql+psycopg://...) or "
            "Oracle (oracle+oracledb://...)"
        )
    database = parsed.database or ":memory:"
    if backend == "sqlite" and database != ":memory:" and not Path(database).is_absolute():
        raise ConfigError(
            f"GLUON_REPO_URL: the SQLite path {database!r} is relative: write "
            "sqlite:////absolute/path/gluon.db (four slashes)"
        )


def _oracle_url(env: Mapping[str, str]) -> str | None:
    conn = env.get("ORA_CONN")
    if not conn:
        return None
    user = env.get("ORA_APP_USER")
    password = env.get("ORA_APP_PASS")
    if not user or not password:
        raise ConfigError("ORA_CONN is set but ORA_APP_USER or ORA_APP_PASS is not: set both")
    if "/" not in conn or ":" not in conn.split("/", 1)[0]:
        raise ConfigError(f"ORA_CONN must look like host:port/service, found {conn!r}")
    hostport, service = conn.split("/", 1)
    return (
        f"oracle+oracledb://{quote(user, safe='')}:{quote(password, safe='')}@{hostport}"
        f"/?service_name={quote(service, safe='')}"
    )


OBJECT_STORE_SECRETS = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_STORAGE_TOKEN",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_SERVICE_ACCOUNT_KEY",
)
"""Object-store settings whose values are secrets (hidden in every log and message)."""

SAFE_S3_COMMITS = {"AWS_CONDITIONAL_PUT": "etag"}
"""How Delta commits on S3 stay atomic: a put-if-absent of the log entry (``If-None-Match``),
which both the engine (Sail) and deltalake use for every commit (docs/deployment.md)."""

UNSAFE_S3_COMMITS = {
    "AWS_S3_ALLOW_UNSAFE_RENAME": (
        "lets two writers of a table overwrite each other's Delta commits: unset it"
    ),
    "AWS_S3_LOCKING_PROVIDER": (
        "is a lock only deltalake takes, while the engine commits with a conditional put: "
        "unset it (S3 and most S3-compatible stores take conditional puts)"
    ),
}


def _object_store(env: Mapping[str, str], lake_root: str) -> dict[str, str]:
    """The object-store settings, refused where Delta commits could be lost."""
    found = {key: value for key, value in env.items() if key.startswith(OBJECT_STORE_PREFIXES)}
    if not lake_root.startswith(("s3://", "s3a://")):
        return found
    for key, problem in UNSAFE_S3_COMMITS.items():
        if found.get(key, "").strip().lower() not in ("", "false", "0", "no", "none"):
            raise ConfigError(f"{key}={found[key]} {problem}")
    _check_s3_credentials(found)
    put = found.get("AWS_CONDITIONAL_PUT", "etag")
    if put.strip().lower() != "etag":
        raise ConfigError(
            f"AWS_CONDITIONAL_PUT={put} would let two writers of a table overwrite each "
            "other's Delta commits: set AWS_CONDITIONAL_PUT=etag or unset it"
        )
    return {**found, **SAFE_S3_COMMITS}


def _check_s3_credentials(found: Mapping[str, str]) -> None:
    """Refuse S3 credentials that cannot work: half a key pair, or none for an S3-compatible
    endpoint (no instance role there; some such stores even answer unsigned reads, so the
    first write would be the first to fail)."""
    has_id, has_secret = (
        bool(found.get("AWS_ACCESS_KEY_ID")),
        bool(found.get("AWS_SECRET_ACCESS_KEY")),
    )
    if has_id != has_secret:
        given, missing = (
            ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
            if has_id
            else ("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID")
        )
        raise ConfigError(f"{given} is set but {missing} is not: set both (or neither)")
    other_ways = ("AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_SKIP_SIGNATURE")
    if found.get("AWS_ENDPOINT_URL") and not has_id and not any(map(found.get, other_ways)):
        raise ConfigError(
            f"AWS_ENDPOINT_URL={found['AWS_ENDPOINT_URL']} is set but no credentials are: set "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) in the environment "
            "or conf/offload.env"
        )


def export_object_store(settings: Settings) -> None:
    """Put the object-store settings where the engine and deltalake read them: the process
    environment. Embedded Sail reads ``AWS_*`` (and the Azure and GCS names) only from there
    and deltalake reads the same names, so one place serves both and they cannot disagree.
    Values already in the environment win, as for every setting."""
    for key, value in settings.object_store.items():
        os.environ.setdefault(key, value)


def _remember_secrets(env: Mapping[str, str]) -> None:
    """Make every password and token the settings carry invisible in logs and messages."""
    remember_secret(env.get("ORA_APP_PASS"))
    for variable in OBJECT_STORE_SECRETS:
        remember_secret(env.get(variable))
    for variable in ("GLUON_SOURCE_URL", "GLUON_REPO_URL", "SPARK_REMOTE", "ORA_CONN"):
        for secret in secrets_of_url(env.get(variable) or ""):
            remember_secret(secret)


def parse_database_url(url: str, variable: str) -> sa.URL:
    """``url`` parsed as a SQLAlchemy URL; a malformed one fails naming ``variable``.

    Raises:
        ConfigError: not a URL, or its port is not a number from 1 to 65535.
    """
    try:
        parsed = sa.engine.make_url(url)
    except (sa.exc.ArgumentError, ValueError) as exc:
        # Not str(exc): SQLAlchemy repeats the whole URL, password included.
        detail = "the port is not a number" if isinstance(exc, ValueError) else "cannot parse it"
        raise ConfigError(
            f"{variable} is not a valid SQLAlchemy URL ({detail}): write "
            "dialect+driver://user:password@host:port/database"
        ) from None
    if parsed.port is not None and not 1 <= parsed.port <= 65535:
        raise ConfigError(
            f"{variable}: the port must be a number from 1 to 65535, found {parsed.port}"
        )
    return parsed


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Build settings from ``environ`` (default ``os.environ``) and the env file.

    Raises:
        ConfigError: a setting is missing or malformed.
    """
    env = dict(os.environ if environ is None else environ)
    home_value = env.get("OFFLOAD_HOME")
    if not home_value:
        raise ConfigError(
            "OFFLOAD_HOME is not set: export OFFLOAD_HOME=/path/to/offload "
            "(the directory that holds conf/offload.env)"
        )
    home = Path(home_value).expanduser()
    env_file = home / ENV_FILE
    warnings = misspelt_environment(env)
    if env_file.is_file():
        env = {**parse_env_file(env_file), **env}
    _remember_secrets(env)

    source_url = env.get("GLUON_SOURCE_URL") or _oracle_url(env)
    if source_url and "://" not in source_url:
        raise ConfigError(
            f"GLUON_SOURCE_URL is not a URL ({source_url!r}): use e.g. sqlite:////abs/path.db"
        )
    if source_url:
        parse_database_url(source_url, "GLUON_SOURCE_URL")
    lake_root = _lake_root(env, home)
    repo_url = env.get("GLUON_REPO_URL") or f"sqlite:///{home / 'repo' / 'gluon.db'}"
    if "://" not in repo_url:
        raise ConfigError(f"GLUON_REPO_URL is not a SQLAlchemy URL: {repo_url!r}")
    _check_repo_url(repo_url)

    spark_remote = env.get("SPARK_REMOTE") or None
    spark_master = env.get("GLUON_SPARK_MASTER") or None
    engine_value = env.get("GLUON_ENGINE") or (
        EngineKind.REMOTE if spark_remote else EngineKind.CLASSIC if spark_master else "sail"
    )
    try:
        engine = EngineKind(engine_value.lower())
    except ValueError:
        choices = ", ".join(kind.value for kind in EngineKind)
        raise ConfigError(
            f"GLUON_ENGINE must be one of {choices}, found {engine_value!r}"
        ) from None
    if engine is EngineKind.REMOTE and not (spark_remote or "").startswith("sc://"):
        raise ConfigError(f"SPARK_REMOTE must look like sc://host:port, found {spark_remote!r}")

    log_dir = Path(env.get("OFFLOAD_LOGDIR") or home / "log").expanduser()
    return Settings(
        offload_home=home,
        source_url=source_url,
        lake_root=lake_root,
        repo_url=repo_url,
        engine=engine,
        spark_remote=spark_remote,
        spark_master=spark_master,
        log_dir=log_dir,
        source_timeouts=_source_timeouts(env),
        umask=_umask(env),
        warnings=warnings,
        object_store=_object_store(env, lake_root),
        max_retained_wal=_max_retained_wal(env),
    )
