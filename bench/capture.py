"""1. Capture overhead: write throughput without and with gluon's CHANGELOG trigger.

PostgreSQL: two identical pgbench databases; gluon enables CHANGELOG on
``public.pgbench_accounts`` in one of them through the real ``offload``
command. pgbench runs a one-statement script (``UPDATE pgbench_accounts SET
abalance = abalance + :delta WHERE aid = :aid``) against each, interleaved
(plain, gluon, plain, gluon) so drift on a shared machine hits both; the figure
is the mean TPS of each.

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
    for name in ("pgbench_plain", "pgbench_gluon"):
        urls[name] = workspace.server.create_database(name)
        _pgbench(workspace, "-i", "-q", "-s", str(scale.pgbench_scale), name)
    home = workspace.home("capture_pg", urls["pgbench_gluon"])
    enabled = home.offload(
        "-t",
        "public.pgbench_accounts",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )
    note(f"pgbench: CHANGELOG enabled on pgbench_accounts in {enabled.seconds:.1f} s")
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
    plain, gluon = _mean(tps["pgbench_plain"]), _mean(tps["pgbench_gluon"])
    results.add(
        Figure(
            "capture",
            "PostgreSQL pgbench UPDATE TPS",
            "TPS",
            gluon,
            plain,
            "no trigger",
            higher_is_better=True,
            params={
                "accounts": accounts,
                "clients": scale.pgbench_clients,
                "seconds": scale.pgbench_seconds,
                "rounds": ROUNDS,
            },
            detail={
                "tps_runs": tps,
                "changes_captured": captured[0] if captured else None,
                "enable_seconds": enabled.seconds,
            },
        )
    )
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
