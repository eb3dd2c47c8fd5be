"""SQLite changelog deletes, one code tree against another: ``delete_changes`` timed.

    python -m bench.changelog_deletes --before /work/main --after . [--rows N] [--repeat 3]

Builds a SQLite source once (an ``items`` table of ``--rows`` rows under CHANGELOG capture,
every row then updated: a changelog of that many changes), then times the delete of the
oldest 100k changes and of all of them, each on a fresh copy of the file, in a child
process per tree (the tree first on PYTHONPATH), the trees alternating round by round.
Prints each tree's median in-process time of ``delete_changes`` (the read of the values
to delete, imports and the first connection are not timed). Not part of ``bench.run``:
it compares code, not gluon with raw.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import sqlalchemy as sa

from gluon.api import (
    TableRef,
    connect,
    create_source_objects,
    plan_source_objects,
    registered_methods,
)

CHILD = """
import sqlite3, sys, time
# An extraction has these loaded before its first delete (pandas by the Spark Connect
# client); pyarrow imports pandas on its first pa.array() of a list when it is installed.
import pandas, pyarrow.compute
try:
    from gluon.api import (
        TableRef, connect, delete_changes, plan_source_objects, registered_methods
    )
except ImportError:  # a code tree from before gluon.api
    from gluon.capture import delete_changes, plan_source_objects
    from gluon.methods import registered_methods
    from gluon.naming import TableRef
    from gluon.source import connect

path, size = sys.argv[1], int(sys.argv[2])
source = connect(f"sqlite:///{path}")
objects = plan_source_objects(
    source, TableRef("main", "items"), registered_methods()["CHANGELOG"]
)
with sqlite3.connect(path) as db:
    rows = db.execute("SELECT gl_seq FROM main_h_items_log ORDER BY gl_seq LIMIT ?", (size,))
    seqs = [seq for (seq,) in rows]
source.check_connection()  # the extraction's engine has read the changelog already
started = time.perf_counter()
deleted = delete_changes(source, objects, seqs)
elapsed = time.perf_counter() - started
assert deleted == size, (deleted, size)
print(elapsed)
"""


def build_changelog(path: Path, rows: int) -> None:
    """``main.items`` with ``rows`` rows, CHANGELOG capture, and one update of every row."""
    source = connect(f"sqlite:///{path}")
    with source.engine.begin() as db:
        db.execute(
            sa.text(
                "CREATE TABLE main.items (id INTEGER PRIMARY KEY, name TEXT, "
                "amount NUMERIC(12,2), noted DATE)"
            )
        )
        db.execute(
            sa.text(
                "WITH RECURSIVE n(id) AS "
                "(SELECT 1 UNION ALL SELECT id + 1 FROM n WHERE id < :rows) "
                "INSERT INTO main.items SELECT id, 'name ' || id, id * 0.01, '2026-01-01' FROM n"
            ),
            {"rows": rows},
        )
    method = registered_methods()["CHANGELOG"]
    ref = TableRef("main", "items")
    objects = plan_source_objects(source, ref, method)
    create_source_objects(source, source.describe_table(ref), method, objects, ("id",))
    with source.engine.begin() as db:
        db.execute(sa.text("UPDATE main.items SET name = name || '!'"))
    source.engine.dispose()


def time_delete(tree: Path, changelog: Path, scratch: Path, size: int) -> float:
    """Seconds ``delete_changes`` of the oldest ``size`` changes took with ``tree``'s code."""
    copy = scratch / "work.db"
    shutil.copyfile(changelog, copy)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(copy), str(size)],
        env=env,
        cwd=scratch,  # python -c puts its working directory first on sys.path, before the tree
        capture_output=True,
        text=True,
        check=True,
    )
    copy.unlink()
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="code tree before the change")
    parser.add_argument("--after", type=Path, required=True, help="code tree after the change")
    parser.add_argument("--rows", type=int, default=1_000_000, help="changelog rows")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (the median counts)")
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    with tempfile.TemporaryDirectory(prefix="gluon-deletes-") as scratch_dir:
        scratch = Path(scratch_dir)
        changelog = scratch / "changelog.db"
        build_changelog(changelog, args.rows)
        for size in sorted({min(100_000, args.rows), args.rows}):
            times: dict[str, list[float]] = {name: [] for name in trees}
            for _ in range(args.repeat):
                for name, tree in trees.items():
                    times[name].append(time_delete(tree, changelog, scratch, size))
            medians = {name: statistics.median(values) for name, values in times.items()}
            runs = "  ".join(
                f"{name} {[round(value, 2) for value in values]}" for name, values in times.items()
            )
            print(
                f"delete {size:,} of {args.rows:,}: before {medians['before']:.2f} s, "
                f"after {medians['after']:.2f} s "
                f"({medians['before'] / medians['after']:.2f}x)  {runs}",
                flush=True,
            )


if __name__ == "__main__":
    main()
