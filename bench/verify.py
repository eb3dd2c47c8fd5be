"""``gluon verify`` on an equal table against reading the table once, and the bytes it
moves with 3 differing rows (issue 31 item 6).

* **verify (equal)**: ``gluon verify -t BENCH.ITEMS --json`` on a freshly offloaded table
  (an extraction, one count and one checksum pass on each side);
* **ADBC read once**: a child process reads the whole source table into Arrow with the
  ADBC PostgreSQL driver (the fastest raw read), the baseline of the goal (<= 1.5x);
* **bytes moved**: three rows broken in the lake's base table (one deleted, two changed),
  ``gluon verify`` again; the JSON's ``bytes_moved`` against the table's Arrow size
  (goal < 1%).

    python -m bench.verify --scale tiny|small|full
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import dataset
from bench.harness import BIN, RESULT_MARK, ROOT, Proc, Workspace, fmt, note, run_process
from bench.items import TABLE_KEY, ItemsLake

SIZES = {"tiny": 20_000, "small": 500_000, "full": 5_000_000}
PARTITIONS = 4
GOAL_RATIO = 1.5
GOAL_BYTES = 0.01


def read_once(url: str) -> None:
    """The baseline, in a child: the whole table into Arrow through ADBC."""
    import adbc_driver_postgresql.dbapi as adbc

    started = time.perf_counter()
    with adbc.connect(url) as conn, conn.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {dataset.QUALIFIED}")
        table = cursor.fetch_arrow_table()
    seconds = time.perf_counter() - started
    print(RESULT_MARK + json.dumps({"rows": table.num_rows, "bytes": table.nbytes, "s": seconds}))


def children_cpu() -> float:
    """CPU seconds of this process's ended children (the commands run_process waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def postgres_cpu(data_dir: Path) -> float | None:
    """CPU seconds of the bench's PostgreSQL cluster so far: the postmaster's backends and
    workers from /proc, the ended ones through the postmaster's own children's times
    (None where /proc is not there)."""
    try:
        postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # ended meanwhile
            if int(entry) == postmaster:
                total += sum(int(value) for value in fields[11:15])  # own and children's
            elif int(fields[1]) == postmaster:
                total += int(fields[11]) + int(fields[12])
        return total / tick
    except (OSError, ValueError):
        return None


def timed(run: Any, data_dir: Path) -> tuple[Any, dict[str, float | None]]:
    """``run()``'s result and the CPU it cost: the child's and PostgreSQL's."""
    child, server = children_cpu(), postgres_cpu(data_dir)
    result = run()
    server_after = postgres_cpu(data_dir)
    return result, {
        "child_cpu_s": round(children_cpu() - child, 2),
        "postgres_cpu_s": None
        if server is None or server_after is None
        else round(server_after - server, 2),
        "load_average": round(os.getloadavg()[0], 1),
    }


def verify(lake: ItemsLake) -> tuple[Proc, dict[str, Any]]:
    proc = run_process(
        [str(BIN / "gluon"), "verify", "-t", TABLE_KEY, "--json"], env=lake.home.env, check=False
    )
    if proc.returncode not in (0, 1):
        raise SystemExit(f"gluon verify failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    [verdict] = json.loads(proc.stdout)
    return proc, verdict


def tamper(lake: ItemsLake) -> None:
    """Three rows broken in the lake's base table, behind gluon's back."""
    from deltalake import DeltaTable

    DeltaTable(lake.base_path).delete("id = 3")
    DeltaTable(lake.base_path).update(updates={"label": "'tampered'"}, predicate="id = 5")
    DeltaTable(lake.base_path).update(updates={"grp": "-1"}, predicate="id = 11")


def cpu_text(cpu: dict[str, float | None]) -> str:
    return f"{cpu['child_cpu_s']} + {cpu['postgres_cpu_s']} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.verify", description=__doc__)
    parser.add_argument("--scale", choices=sorted(SIZES), default="small")
    parser.add_argument("--read-once", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    if args.read_once:
        read_once(args.read_once)
        return 0
    rows = SIZES[args.scale]
    work = Path(tempfile.mkdtemp(prefix="gluon-verify-bench-"))
    with Workspace(work) as workspace:
        lake = ItemsLake.build(workspace, f"verify_{args.scale}", rows, PARTITIONS)
        data_dir = workspace.server.data_dir
        baseline, baseline_cpu = timed(
            lambda: run_process(
                [sys.executable, "-m", "bench.verify", "--read-once", dataset.libpq_url(lake.url)]
            ),
            data_dir,
        )
        (equal, equal_verdict), equal_cpu = timed(lambda: verify(lake), data_dir)
        note(f"verify (equal): {equal.seconds:.1f} s, ADBC read once: {baseline.seconds:.1f} s")
        tamper(lake)
        broken, broken_verdict = verify(lake)
        lake.drop()
    size = int(baseline.result["bytes"])
    ratio = equal.seconds / baseline.seconds
    moved = int(broken_verdict["bytes_moved"]) / size
    found = {
        kind: broken_verdict[kind]
        for kind in ("missing_in_lake", "extra_in_lake", "different_values")
    }
    print(
        f"\n{args.scale}: {rows:,} rows, {size:,} bytes as Arrow\n"
        f"verify (equal)         {fmt(equal.seconds):>7} s   ADBC read once "
        f"{fmt(baseline.seconds):>7} s   {ratio:.2f}x (goal <= {GOAL_RATIO}x)\n"
        f"verify (3 broken)      {fmt(broken.seconds):>7} s   bytes moved "
        f"{broken_verdict['bytes_moved']:,} = {moved:.3%} of the table (goal < {GOAL_BYTES:.0%})\n"
        f"CPU (the command's + PostgreSQL's): verify {cpu_text(equal_cpu)}, ADBC "
        f"{cpu_text(baseline_cpu)}; load average {equal_cpu['load_average']}\n"
        f"found: {found}"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"verify-{args.scale}.json").write_text(
        json.dumps(
            {
                "scale": args.scale,
                "rows": rows,
                "table_bytes": size,
                "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
                "verify_equal_s": round(equal.seconds, 2),
                "adbc_read_once_s": round(baseline.seconds, 2),
                "adbc_read_in_process_s": round(float(baseline.result["s"]), 2),
                "verify_equal_cpu": equal_cpu,
                "adbc_read_once_cpu": baseline_cpu,
                "ratio": round(ratio, 2),
                "equal_verdict": equal_verdict,
                "verify_broken_s": round(broken.seconds, 2),
                "bytes_moved": broken_verdict["bytes_moved"],
                "bytes_moved_fraction": moved,
                "found": found,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
