"""What the CHANGELOG trigger costs the application on PostgreSQL, against no capture.

    python -m bench.trigger_cost [--accounts 200000] [--seconds 10] [--rounds 2] [--clients 2]

Two pgbench databases in one throwaway cluster (``pgbench -i``, ``--accounts`` rows in
``pgbench_accounts``); gluon enables CHANGELOG on ``public.pgbench_accounts`` in one of
them through the real ``offload`` command, the other has no capture. Then, interleaved
(plain, CHANGELOG, plain, ...) so drift on a shared machine hits both:

- pgbench single-row ``UPDATE pgbench_accounts ... WHERE aid = :aid`` TPS (``--seconds``
  per run, ``--rounds`` runs each);
- one ``UPDATE`` of every row (``--accounts`` rows), one multi-row ``INSERT ... SELECT``
  of 50k new rows and one ``DELETE`` of those rows, each timed as its own committed
  transaction (the changelog is emptied between rounds, as an extraction would).

Prints each figure with and without capture and the ratio (for TPS: share of the TPS
without capture, higher is better; for bulk DML: time with capture over time without,
lower is better). Not part of ``bench.run``: it measures the trigger alone.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench import dataset
from bench.harness import Workspace, note

SCRIPT = """\\set aid random(1, {accounts})
\\set delta random(-5000, 5000)
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
"""
BULK_INSERT_ROWS = 50_000
DATABASES = ("trigger_plain", "trigger_changelog")


def _pgbench(workspace: Workspace, *args: str) -> str:
    server = workspace.server
    assert server.port is not None
    argv = [str(server.bindir / "pgbench"), "-h", "127.0.0.1", "-p", str(server.port)]
    argv += ["-U", "postgres", *args]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"pgbench {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr


def _tps(workspace: Workspace, script: Path, database: str, seconds: int, clients: int) -> float:
    out = _pgbench(
        workspace, "-n", "-f", str(script), "-c", str(clients), "-j", str(clients),
        "-T", str(seconds), database,
    )  # fmt: skip
    match = re.search(r"tps = ([\d.]+)", out)
    if not match:
        raise RuntimeError(f"no tps in pgbench output:\n{out}")
    return float(match.group(1))


def _timed(url: str, statement: str) -> float:
    """Seconds to run and commit ``statement`` (autocommit: its own transaction)."""
    with dataset.connect(url) as conn:
        started = time.perf_counter()
        conn.execute(statement)
        return time.perf_counter() - started


def _bulk(url: str, accounts: int) -> dict[str, float]:
    first_new = accounts + 1
    last_new = accounts + BULK_INSERT_ROWS
    return {
        f"UPDATE {accounts:,} rows": _timed(
            url, "UPDATE pgbench_accounts SET abalance = abalance + 1"
        ),
        f"INSERT {BULK_INSERT_ROWS:,} rows": _timed(
            url,
            "INSERT INTO pgbench_accounts (aid, bid, abalance, filler) "
            f"SELECT g, 1, 0, '' FROM generate_series({first_new}, {last_new}) g",
        ),
        f"DELETE {BULK_INSERT_ROWS:,} rows": _timed(
            url, f"DELETE FROM pgbench_accounts WHERE aid >= {first_new}"
        ),
    }


def _settle(url: str, captured: bool) -> None:
    with dataset.connect(url) as conn:
        if captured:
            # What an extraction does after shipping: the changelog does not grow run by run.
            conn.execute("TRUNCATE public_h.pgbench_accounts_log")
        conn.execute("VACUUM ANALYZE pgbench_accounts")
        conn.execute("CHECKPOINT")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--accounts", type=int, default=200_000)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--clients", type=int, default=2)
    args = parser.parse_args()
    if args.accounts % 100_000:
        parser.error("--accounts must be a multiple of 100000 (pgbench -i -s)")
    tmp = Path(tempfile.mkdtemp(prefix="gluon-trigger-cost-"))
    with Workspace(tmp / "ws") as workspace:  # removes the directory on exit
        run(workspace, args.accounts, args.seconds, args.rounds, args.clients)


def run(workspace: Workspace, accounts: int, seconds: int, rounds: int, clients: int) -> None:
    script = workspace.root / "update_account.sql"
    script.write_text(SCRIPT.format(accounts=accounts))
    urls = {}
    for name in DATABASES:
        urls[name] = workspace.server.create_database(name)
        _pgbench(workspace, "-i", "-q", "-s", str(accounts // 100_000), name)
    home = workspace.home("trigger_cost", urls["trigger_changelog"])
    home.offload(
        "-t", "public.pgbench_accounts", "-x", "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )  # fmt: skip
    note("CHANGELOG enabled on pgbench_accounts")
    tps: dict[str, list[float]] = {name: [] for name in DATABASES}
    bulk: dict[str, dict[str, list[float]]] = {name: {} for name in DATABASES}
    for round_ in range(rounds):
        for name in DATABASES:
            captured = name == "trigger_changelog"
            _settle(urls[name], captured)
            tps[name].append(_tps(workspace, script, name, seconds, clients))
            _settle(urls[name], captured)
            for label, spent in _bulk(urls[name], accounts).items():
                bulk[name].setdefault(label, []).append(spent)
            note(f"round {round_ + 1}: {name} done")
    with dataset.connect(urls["trigger_changelog"]) as conn:
        row = conn.execute(
            "SELECT tgname, tgtype FROM pg_trigger WHERE tgrelid = 'pgbench_accounts'::regclass "
            "AND NOT tgisinternal ORDER BY tgname"
        ).fetchall()
    note(f"capture triggers: {row}")
    plain, changelog = (statistics.mean(tps[name]) for name in DATABASES)
    print(f"\n{'figure':<28} {'no capture':>12} {'CHANGELOG':>12} {'ratio':>8}")
    print(
        f"{'pgbench UPDATE TPS':<28} {plain:>12,.0f} {changelog:>12,.0f} "
        f"{changelog / plain:>7.2f}x  (share of TPS without capture; goal >= 0.8x)"
    )
    for label in bulk["trigger_plain"]:
        base, with_capture = (statistics.mean(bulk[name][label]) for name in DATABASES)
        goal = "  (goal <= 1.5x)" if label.startswith("UPDATE") else ""
        print(
            f"{label:<28} {base:>11.2f}s {with_capture:>11.2f}s {with_capture / base:>7.2f}x{goal}"
        )
    print(f"tps runs: {tps}")
    home.discard()


if __name__ == "__main__":
    main()
