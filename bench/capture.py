"""1. Capture overhead: write throughput without capture, with gluon's CHANGELOG trigger,
and with PG_LOGICAL (a logical replication slot: nothing on the write path).

PostgreSQL: three identical pgbench databases in one cluster (``wal_level=logical``
for all three, as PG_LOGICAL needs); gluon enables CHANGELOG on
``public.pgbench_accounts`` in one and PG_LOGICAL in another through the real
``offload`` command. pgbench runs a one-statement script (``UPDATE pgbench_accounts
SET abalance = abalance + :delta WHERE aid = :aid``) against each, interleaved
(plain, CHANGELOG, PG_LOGICAL, plain, ...) so drift on a shared machine hits all;
the figure is the mean TPS of each. Nothing reads the slot during the runs: the
decoding cost is the extraction's, not the writers'.

SQLite: two identical files (``accounts``: 100 bytes a row, like pgbench's),
journal_mode=WAL, synchronous=NORMAL; a Python loop runs N single-row UPDATEs,
each in its own transaction, against each file, interleaved the same way.
"""

from __future__ import annotations

import random
import re
import sqlite3
import subprocess
import time
from pathlib import Path

from bench import dataset
from bench.harness import Figure, Results, Workspace, note
from bench.scales import Scale

SCRIPT = """\\set aid random(1, {accounts})
\\set delta random(-5000, 5000)
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
"""
ROUNDS = 2
METHODS = {"pgbench_gluon": "CHANGELOG", "pgbench_logical": "PG_LOGICAL"}
"""The pgbench database of each captured configuration, and its extraction method."""


def run(workspace: Workspace, scale: Scale, results: Results) -> None:
    postgres(workspace, scale, results)
    sqlite(workspace, scale, results)


def _pgbench(workspace: Workspace, *args: str) -> str:
    server = workspace.server
    assert server.port is not None
    argv = [str(server.bindir / "pgbench"), "-h", "127.0.0.1", "-p", str(server.port)]
    argv += ["-U", "postgres", *args]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"pgbench {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr


def postgres(workspace: Workspace, scale: Scale, results: Results) -> None:
    accounts = 100_000 * scale.pgbench_scale
    script = workspace.root / "update_account.sql"
    script.write_text(SCRIPT.format(accounts=accounts))
    urls = {}
    for name in ("pgbench_plain", *METHODS):
        urls[name] = workspace.server.create_database(name)
        _pgbench(workspace, "-i", "-q", "-s", str(scale.pgbench_scale), name)
    homes = {}
    enable_seconds = {}
    for name, method in METHODS.items():
        homes[name] = workspace.home(f"capture_{name}", urls[name])
        enabled = homes[name].offload(
            "-t",
            "public.pgbench_accounts",
            "-x",
            "--incremental-updates-enabled",
            f"--incremental-extraction-method={method}",
        )
        enable_seconds[method] = enabled.seconds
        note(f"pgbench: {method} enabled on pgbench_accounts in {enabled.seconds:.1f} s")
    tps: dict[str, list[float]] = {name: [] for name in urls}
    clients = str(scale.pgbench_clients)
    for _ in range(ROUNDS):
        for name in urls:
            with dataset.connect(urls[name]) as conn:
                conn.execute("VACUUM ANALYZE pgbench_accounts")
                conn.execute("CHECKPOINT")
            out = _pgbench(
                workspace,
                "-n",
                "-f",
                str(script),
                "-c",
                clients,
                "-j",
                clients,
                "-T",
                str(scale.pgbench_seconds),
                name,
            )
            match = re.search(r"tps = ([\d.]+)", out)
            if not match:
                raise RuntimeError(f"no tps in pgbench output:\n{out}")
            tps[name].append(float(match.group(1)))
    with dataset.connect(urls["pgbench_gluon"]) as conn:
        captured = conn.execute("SELECT COUNT(*) FROM public_h.pgbench_accounts_log").fetchone()
    with dataset.connect(urls["pgbench_logical"]) as conn:
        # What the unread slot makes the server keep (decoding it is the extraction's work).
        retained = conn.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint "
            "FROM pg_replication_slots WHERE database = current_database()"
        ).fetchone()
        conn.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            "WHERE database = current_database()"
        )
    plain = _mean(tps["pgbench_plain"])
    means = {METHODS[name]: _mean(tps[name]) for name in METHODS}
    params = {
        "accounts": accounts,
        "clients": scale.pgbench_clients,
        "seconds": scale.pgbench_seconds,
        "rounds": ROUNDS,
    }
    results.add(
        Figure(
            "capture",
            "PostgreSQL pgbench UPDATE TPS",
            "TPS",
            means["CHANGELOG"],
            plain,
            "no trigger",
            higher_is_better=True,
            params={**params, "method": "CHANGELOG"},
            detail={
                "tps_runs": tps,
                "changes_captured": captured[0] if captured else None,
                "enable_seconds": enable_seconds["CHANGELOG"],
            },
        )
    )
    results.add(
        Figure(
            "capture",
            "PostgreSQL pgbench UPDATE TPS, PG_LOGICAL",
            "TPS",
            means["PG_LOGICAL"],
            plain,
            "no capture",
            higher_is_better=True,
            params={**params, "method": "PG_LOGICAL"},
            detail={
                "tps_runs": tps,
                "share_of_no_capture": means["PG_LOGICAL"] / plain,
                "goal_share_of_no_capture": 0.95,
                "over_changelog": means["PG_LOGICAL"] / means["CHANGELOG"],
                "wal_retained_bytes": retained[0] if retained else None,
                "enable_seconds": enable_seconds["PG_LOGICAL"],
            },
        )
    )
    for home in homes.values():
        home.discard()
    for name in urls:
        workspace.server.drop_database(name)


def _create_accounts(path: Path, rows: int) -> None:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(
            "CREATE TABLE accounts (aid INTEGER PRIMARY KEY, bid INTEGER NOT NULL, "
            "abalance INTEGER NOT NULL, filler TEXT)"
        )
        db.executemany(
            "INSERT INTO accounts VALUES (?, ?, 0, ?)",
            ((aid, 1 + (aid - 1) // 100_000, " " * 84) for aid in range(1, rows + 1)),
        )


def _update_loop(path: Path, rows: int, updates: int, seed: int) -> float:
    """Updates per second: ``updates`` single-row UPDATEs, each committed on its own."""
    rng = random.Random(seed)
    work = [(rng.randint(-5000, 5000), rng.randint(1, rows)) for _ in range(updates)]
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA synchronous=NORMAL")
        started = time.perf_counter()
        for delta, aid in work:
            db.execute("BEGIN")
            db.execute("UPDATE accounts SET abalance = abalance + ? WHERE aid = ?", (delta, aid))
            db.execute("COMMIT")
        return updates / (time.perf_counter() - started)
    finally:
        db.close()


def sqlite(workspace: Workspace, scale: Scale, results: Results) -> None:
    files = {name: workspace.root / f"{name}.db" for name in ("plain", "gluon")}
    for path in files.values():
        path.unlink(missing_ok=True)
        _create_accounts(path, scale.sqlite_rows)
    home = workspace.home("capture_sqlite", f"sqlite:///{files['gluon']}")
    enabled = home.offload(
        "-t",
        "main.accounts",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )
    note(f"sqlite: CHANGELOG enabled on main.accounts in {enabled.seconds:.1f} s")
    rates: dict[str, list[float]] = {name: [] for name in files}
    for round_ in range(ROUNDS):
        for name, path in files.items():
            rates[name].append(_update_loop(path, scale.sqlite_rows, scale.sqlite_updates, round_))
    with sqlite3.connect(files["gluon"]) as db:
        logs = [
            row[0]
            for row in db.execute("SELECT name FROM sqlite_master WHERE name LIKE '%accounts_log'")
        ]
        captured = db.execute(f'SELECT COUNT(*) FROM "{logs[0]}"').fetchone()[0] if logs else None
    plain, gluon = _mean(rates["plain"]), _mean(rates["gluon"])
    results.add(
        Figure(
            "capture",
            "SQLite single-row UPDATE commits/s",
            "commits/s",
            gluon,
            plain,
            "no trigger",
            higher_is_better=True,
            params={"rows": scale.sqlite_rows, "updates": scale.sqlite_updates, "rounds": ROUNDS},
            detail={"rate_runs": rates, "changes_captured": captured},
        )
    )
    home.discard()
    for path in files.values():
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)
