"""Prometheus metrics of the service (``--metrics-port``).

Counters are kept by the scheduler as runs end; the lag gauges are read from the
status collection by a background thread (``gluon.service.lag``) and served from
the last reading, so a scrape never waits for the source.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from prometheus_client import CollectorRegistry, Counter, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from gluon.errors import UsageError
from gluon.service.lag import TableLag

LAG_GAUGES = (
    (
        "gluon_table_backlog_changes",
        "Changes captured in the source and not yet in the lake.",
        "backlog",
    ),
    (
        "gluon_table_seconds_since_extraction",
        "Seconds since the table's last successful extraction finished.",
        "seconds_since_extraction",
    ),
    (
        "gluon_table_oldest_pending_change_age_seconds",
        "Age of the oldest change not yet in the lake.",
        "oldest_pending_seconds",
    ),
    (
        "gluon_table_last_latency_seconds",
        "Source commit to lake visibility, for the last extraction.",
        "last_latency_seconds",
    ),
    (
        "gluon_table_changes_set_aside",
        "Changes the lake could not take, set aside out of the changelog (never shipped).",
        "set_aside",
    ),
    (
        "gluon_verify_differences",
        "Keys the table's latest gluon verify found differing between the source and the lake.",
        "verify_differences",
    ),
    (
        "gluon_verify_seconds_since",
        "Seconds since the table's latest gluon verify.",
        "seconds_since_verify",
    ),
)
"""Gauge name, help, TableLag field. A table whose figure is unknown has no sample, except
the backlog: once read, it keeps its last value (``gluon_table_backlog_age_seconds``
says how old), so a reading that failed under load leaves no gap in the series."""

BACKLOG_AGE = (
    "gluon_table_backlog_age_seconds",
    "Seconds since gluon_table_backlog_changes was read (it keeps its last value while a "
    "reading fails).",
)


class _LagCollector(Collector):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lags: dict[str, TableLag] = {}
        self._backlog_read_at: dict[str, float] = {}

    def update(self, table_key: str, lag: TableLag) -> None:
        with self._lock:
            before = self._lags.get(table_key)
            if lag.backlog is not None:
                self._backlog_read_at[table_key] = time.monotonic()
            elif before is not None and before.backlog is not None:
                lag = replace(lag, backlog=before.backlog)
            self._lags[table_key] = lag

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            lags = dict(self._lags)
            read_at = dict(self._backlog_read_at)
        for name, help_text, field in LAG_GAUGES:
            family = GaugeMetricFamily(name, help_text, labels=["table"])
            for table_key, lag in sorted(lags.items()):
                value = getattr(lag, field)
                if value is not None:
                    family.add_metric([table_key], float(value))
            yield family
        ages = GaugeMetricFamily(*BACKLOG_AGE, labels=["table"])
        now = time.monotonic()
        for table_key, at in sorted(read_at.items()):
            ages.add_metric([table_key], now - at)
        yield ages


class ServiceMetrics:
    """The service's metrics, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.runs = Counter(
            "gluon_service_runs",
            "Runs the service started, by table, action and outcome.",
            ["table", "action", "outcome"],
            registry=self.registry,
        )
        self.failures = Counter(
            "gluon_service_failures",
            "Runs that failed, by table and action.",
            ["table", "action"],
            registry=self.registry,
        )
        self.changes = Counter(
            "gluon_service_changes_shipped",
            "Changes the service's successful extractions took from the source, by table.",
            ["table"],
            registry=self.registry,
        )
        self._lags = _LagCollector()
        self.registry.register(self._lags)
        self._server: Any = None

    def declare(self, table_key: str, actions: list[str]) -> None:
        """Show every table's counters from the start (at 0), not from its first run."""
        self.changes.labels(table_key)
        for action in actions:
            self.failures.labels(table_key, action)

    def run_ended(
        self, table_key: str, action: str, outcome: str, failed: bool, shipped: int
    ) -> None:
        self.runs.labels(table_key, action, outcome).inc()
        if failed:
            self.failures.labels(table_key, action).inc()
        if shipped:
            self.changes.labels(table_key).inc(shipped)

    def lag(self, table_key: str, lag: TableLag) -> None:
        self._lags.update(table_key, lag)

    def serve(self, port: int, address: str) -> None:
        """Listen on ``address:port`` (a daemon thread).

        Raises:
            UsageError: the port cannot be listened on (in use, not allowed).
        """
        try:
            self._server = start_http_server(port, addr=address, registry=self.registry)
        except OSError as exc:
            raise UsageError(
                f"--metrics-port {port}: cannot listen on {address}:{port}: {exc.strerror or exc}"
            ) from None

    def close(self) -> None:
        if isinstance(self._server, tuple):
            server, thread = self._server
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
        self._server = None
