"""Spark session factory: embedded Sail (default), Spark Connect, or classic Spark.

One Sail server is started per process on first use (on 127.0.0.1, a free
port) and stopped at exit; each command opens its own session on it.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

from gluon.config import EngineKind, Settings, export_object_store
from gluon.errors import LakeError
from gluon.faults import fault_point
from gluon.lake import failures, float_stats, sqllog
from gluon.lake.sigint import start_keeping_sigint
from gluon.reuse import keeping, kept

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

_server_lock = threading.Lock()
_sail_server: Any = None

SESSION_CONF = {"spark.sql.session.timeZone": "UTC"}
EMBEDDED_STACK_BYTES = 64 * 1024 * 1024
"""Thread stack of the embedded engine (``SAIL_RUNTIME__STACK_SIZE`` overrides it)."""
EMBEDDED_ALLOCATOR_OPTIONS = {"MIMALLOC_PURGE_DELAY": "0"}
"""The embedded engine's allocator gives freed memory back at once (set in the
environment before the engine loads; a value already set there wins)."""


def _sail_url() -> str:
    global _sail_server
    with _server_lock:
        if _sail_server is None:
            # Sail logs through Rust's env_logger; keep its INFO lines out of users' terminals.
            os.environ.setdefault("RUST_LOG", "error")
            # Deeply nested expressions (a query ORing a few hundred terms) overflowed Sail's
            # default 8 MiB thread stack and killed the process; 64 MiB took 2,500 terms.
            os.environ.setdefault("SAIL_RUNTIME__STACK_SIZE", str(EMBEDDED_STACK_BYTES))
            # The engine allocates through mimalloc, which by default keeps freed pages for
            # reuse: the service grew about 0.33 MB a Delta commit, given back to the system
            # with purging at once (0.10 MB; bench/service_soak.py, docs/operations.md).
            for option, value in EMBEDDED_ALLOCATOR_OPTIONS.items():
                os.environ.setdefault(option, value)
            try:
                from pysail.spark import SparkConnectServer
            except ImportError as exc:
                raise LakeError(f"the embedded Sail engine is not installed: {exc}") from None
            server = SparkConnectServer("127.0.0.1", 0)
            # Ctrl-C must not stop the server: gluon stops it, at exit (gluon.lake.sigint).
            start_keeping_sigint(lambda: server.start(background=True))
            _sail_server = server
            atexit.register(_stop_sail)
            log.debug("started Sail on %s", server.listening_address)
        host, port = _sail_server.listening_address
    return f"sc://{host}:{port}"


def _stop_sail() -> None:
    global _sail_server
    with _server_lock:
        if _sail_server is not None:
            _sail_server.stop()
            _sail_server = None


def _import_connect_client() -> None:
    """Import pyspark's Spark Connect client, from a ``python -c`` process too.

    pyspark.sql.connect takes a ``__main__`` with neither ``__spec__`` nor ``__file__`` (a
    ``python -c`` process) for one of its own doctest runs and imports its test helpers,
    which look for a Spark installation at import time; pyspark-client, the default
    install, has none, and that lookup ends the process (exit -1, no traceback). Any
    SPARK_HOME skips the lookup; it is set for that import only.
    """
    main = sys.modules.get("__main__")
    if (
        "pyspark.sql.connect.session" in sys.modules
        or "SPARK_HOME" in os.environ
        or getattr(main, "__spec__", None) is not None
        or hasattr(main, "__file__")
    ):
        return
    import pyspark

    os.environ["SPARK_HOME"] = os.path.dirname(pyspark.__file__)
    try:
        import pyspark.sql.connect.session
    finally:
        del os.environ["SPARK_HOME"]


def _remote_session(url: str) -> SparkSession:
    from pyspark.sql import SparkSession

    _import_connect_client()

    builder = SparkSession.builder.remote(url)
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    return builder.create()


CLASSIC_MISSING = (
    "classic Spark (GLUON_SPARK_MASTER) needs the full pyspark and delta-spark, which the "
    "default install leaves out: run pip install -e '.[classic]' in gluon's checkout, or set "
    "SPARK_REMOTE=sc://host:port to use a Spark Connect cluster"
)


def classic_installed() -> bool:
    """Whether classic Spark can run: the full pyspark (not pyspark-client) and delta-spark.

    The default install has pyspark-client, the Spark Connect client without the JVM jars.
    """
    try:
        import delta  # noqa: F401
        from pyspark.util import is_remote_only
    except ImportError:
        return False
    return not is_remote_only()


def _classic_session(master: str) -> SparkSession:
    if not classic_installed():
        raise LakeError(CLASSIC_MISSING)
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
    )
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    try:
        # delta-spark (the optional classic extra) ships no type hints.
        session: SparkSession = configure_spark_with_delta_pip(builder).getOrCreate()
        return session
    except Exception as exc:
        raise LakeError(
            f"cannot start classic Spark with Delta (are the Delta jars resolvable?): {exc}"
        ) from None


def _reachable_remote(url: str, timeout: float = 5.0) -> str:
    """``url`` if its host answers; pyspark would otherwise retry for minutes."""
    parsed = urlparse(url.replace("sc://", "http://", 1))
    host, port = parsed.hostname or "localhost", parsed.port or 15002
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise LakeError(
            f"SPARK_REMOTE {url} does not answer ({exc}): start the Spark Connect server or "
            "unset SPARK_REMOTE to use the embedded engine"
        ) from None
    return url


_FACTORIES: dict[EngineKind, Callable[[Settings], SparkSession]] = {
    EngineKind.SAIL: lambda settings: _remote_session(_sail_url()),
    EngineKind.REMOTE: lambda settings: _remote_session(
        _reachable_remote(str(settings.spark_remote))
    ),
    EngineKind.CLASSIC: lambda settings: _classic_session(str(settings.spark_master)),
}


class LakeSession:
    """A Spark session with gluon's conventions: every SQL statement goes through :meth:`sql`."""

    def __init__(self, spark: SparkSession, settings: Settings) -> None:
        self.spark = spark
        self.settings = settings
        self.unavailable: dict[str, str] = {}
        """User views that could not be registered, with the reason (see gluon.read.catalog)."""
        self.base_only: dict[str, tuple[str, int]] = {}
        """User views registered over the base table alone (no change was pending): the
        delta table's location and the version whose file list showed none (gluon.read.catalog)."""
        self.pinned: dict[str, tuple[str, int]] = {}
        """User views split by touched base partitions, pinned to the Delta versions the split
        was derived from: the delta table's location and that version (gluon.lake.touched)."""

    def sql(self, statement: str) -> DataFrame:
        """Run one Spark SQL statement (recorded for the portability check)."""
        sqllog.record("sql", statement)
        log.debug("spark sql: %s", statement)
        try:
            return self.spark.sql(statement)
        except Exception as exc:
            if is_commit_conflict(exc):
                raise
            raise LakeError(f"the lake engine rejected a statement: {_first_line(exc)}") from exc

    def interrupt(self) -> None:
        """Cancel whatever the engine still runs for this session (after Ctrl-C: pyspark's
        Spark Connect client cancels the operation it was reading, but not one interrupted
        elsewhere). Best effort: a failure is logged, the session stays usable."""
        log.debug("spark: interruptAll")
        try:
            self.spark.interruptAll()
        except Exception as exc:
            log.info("the lake engine did not take the interrupt: %s", _first_line(exc))

    def table_exists(self, name: str) -> bool:
        """Whether the catalog has a table or view ``name`` (a quoted ``schema.table``)."""
        log.debug("spark catalog: tableExists %s", name)
        try:
            return bool(self.spark.catalog.tableExists(name))
        except Exception as exc:
            raise LakeError(f"the lake engine's catalog failed: {_first_line(exc)}") from exc

    def columns(self, name: str) -> list[str]:
        """The column names of the table or view ``name`` (as a statement would write it)."""
        log.debug("spark catalog: columns of %s", name)
        try:
            return list(self.spark.table(name).columns)
        except Exception as exc:
            raise LakeError(f"the lake engine's catalog failed: {_first_line(exc)}") from exc

    def write(
        self,
        frame: DataFrame,
        location: str,
        *,
        mode: str,
        partition_by: list[str] | tuple[str, ...] = (),
        replace_where: str | None = None,
        overwrite_schema: bool = False,
    ) -> None:
        """Write ``frame`` to the Delta table at ``location`` in one commit (recorded).

        ``mode`` is ``append`` or ``overwrite``; with ``replace_where`` an overwrite replaces
        only the rows matching it (the caller filters ``frame`` to them: Sail does not check).
        A lost commit race is raised as it is, for the caller to retry what must be redone.
        """
        writer = frame.write.format("delta").mode(mode)
        for name, value in float_stats.engine_write_options(location, frame.schema).items():
            writer = writer.option(name, value)
        if replace_where:
            writer = writer.option("replaceWhere", exactly_where(replace_where))
        if overwrite_schema:  # an overwrite that changes column types (schema evolution)
            writer = writer.option("overwriteSchema", "true")
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        sqllog.record(
            "write",
            f"{mode} {location} partitionBy={list(partition_by)} replaceWhere={replace_where}",
        )
        fault_point("lake.before_write")
        try:
            writer.save(location)
        except Exception as exc:
            if is_commit_conflict(exc):
                raise
            raise LakeError(
                f"writing the Delta table at {location} failed: "
                f"{failures.storage_cause(exc) or _first_line(exc)}"
            ) from exc
        fault_point("lake.after_write")

    def execute(self, statement: str) -> None:
        """Run a statement for its effect, again if its commit lost a race (it is idempotent)."""
        fault_point("lake.before_execute")
        retry_commit(lambda: self.sql(statement).collect())
        fault_point("lake.after_execute")


# Errors of Delta commits that lost a race with another writer, and nothing else (a message
# that merely mentions "concurrent", such as a column name, is no conflict). Measured on
# Sail: a DELETE racing an append fails with the first; a reader racing a checkpoint with
# the second. Spark with delta-spark raises its conflict exceptions by class name.
_RETRYABLE = re.compile(
    r"(?i:Failed to commit transaction|Missing commit file)"
    r"|\b(?:Concurrent(?:Append|DeleteRead|DeleteDelete|Transaction|Write)"
    r"|MetadataChanged|ProtocolChanged)Exception\b"
)
T = TypeVar("T")


def is_commit_conflict(exc: BaseException) -> bool:
    """True for an error another attempt may not hit (a lost commit race)."""
    return bool(_RETRYABLE.search(str(exc)))


def retry_commit(action: Callable[[], T], *, attempts: int = 6) -> T:
    """Run ``action``, again after a lost commit race (with backoff); it must be idempotent."""
    from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

    for attempt in Retrying(
        retry=retry_if_exception(is_commit_conflict),
        stop=stop_after_attempt(attempts),
        wait=wait_exponential(multiplier=0.2, max=5),
        reraise=True,
    ):
        with attempt:
            return action()
    raise AssertionError("unreachable")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return re.sub(r"\s+", " ", line)[:500]


def first_line(exc: BaseException) -> str:
    """The first line of an error's message, for one-line reports."""
    return _first_line(exc)


def exactly_where(predicate: str) -> str:
    """``predicate`` for a replaceWhere: the rows it is TRUE for, not those it is NULL for.

    Sail 0.7.2 keeps the rows of a rewritten file where ``NOT predicate`` is TRUE, so a row
    whose predicate is NULL (a NULL key outside an increment's range) was dropped. The
    ``IS TRUE`` term makes NULL count as FALSE; the bare conjunct keeps file pruning by
    statistics, which ``IS TRUE`` alone defeats (every file would be rewritten).
    """
    return f"({predicate}) AND (({predicate}) IS TRUE)"


def _start(settings: Settings) -> SparkSession:
    try:
        return _FACTORIES[settings.engine](settings)
    except LakeError:
        raise
    except Exception as exc:
        raise LakeError(
            f"cannot start the lake engine ({settings.engine}): {_first_line(exc)}"
        ) from exc


def _stop(spark: SparkSession) -> None:
    try:
        spark.stop()
    except Exception:  # a session that failed to close must not hide the real error
        log.debug("closing the Spark session failed", exc_info=True)


KEPT_SESSION_IDLE_SECONDS = 60.0
"""A worker's kept session unused this long is replaced (the engine may have dropped it)."""


class _KeptSession:
    """One worker thread's embedded-engine session, reused by its runs (``gluon.reuse``).

    The embedded engine keeps some memory for every session it ever served (about a
    quarter of a megabyte, measured): a session per run grew the service without bound
    under load. A run that fails drops it; the next run starts a new one.
    """

    def __init__(self) -> None:
        self.spark: SparkSession | None = None
        self.used_at = 0.0

    def take(self, settings: Settings) -> SparkSession:
        if self.spark is not None and time.monotonic() - self.used_at > KEPT_SESSION_IDLE_SECONDS:
            self.stop()
        if self.spark is None:
            self.spark = _start(settings)
        return self.spark

    def stop(self) -> None:
        if self.spark is not None:
            spark, self.spark = self.spark, None
            _stop(spark)


LakeOpener = Callable[[], AbstractContextManager[LakeSession]]
"""What deep code is given to open a lake session when it needs one (``lake_opener``), in
place of the settings it would open it from."""


def lake_opener(settings: Settings) -> LakeOpener:
    """Opens a lake session from ``settings`` when called (``with opener() as session``)."""
    return partial(open_session, settings)


@contextmanager
def open_session(settings: Settings) -> Iterator[LakeSession]:
    """A lake session for one command; closed on exit (in the service, the worker's
    embedded-engine session is kept for its next run: ``_KeptSession``)."""
    export_object_store(settings)  # for Python callers too (gluon.api), not only commands
    if keeping() and settings.engine is EngineKind.SAIL:
        holder = kept(("lake session",), _KeptSession, per_thread=True, close=_KeptSession.stop)
        spark = holder.take(settings)
        try:
            yield LakeSession(spark, settings)
        except BaseException:
            holder.stop()
            raise
        holder.used_at = time.monotonic()
        return
    spark = _start(settings)
    try:
        yield LakeSession(spark, settings)
    finally:
        _stop(spark)
