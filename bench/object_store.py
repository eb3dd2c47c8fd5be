"""The lake on an object store against the lake on local disk, in one run (issue 29).

``python -m bench.object_store [--rows N] [--partitions P] [--changes C] [--repeats R]``

One PostgreSQL ``bench.items`` table is offloaded twice by the real ``offload`` command:
into a local lake, and into a bucket of an S3-compatible server on 127.0.0.1 (moto, in its
own process, ``tests/support/s3.py``). On each, in turn: the initial offload, an
extraction of C changed rows (CHANGELOG), an in-place compaction, and a view read through
``gluon query`` (``COUNT(*)`` and ``SUM(amount)`` over the user view, after another C
changes were extracted and left pending). Each operation is a fresh child process, the
fastest of R rounds (each round starts from a fresh source and lake; local and object store
interleaved). Printed: seconds on each side, the ratio (object store over local), and the
requests the object store served during the operation, by HTTP method (counted from the
server's request log).

moto answers from memory on the same machine, so the ratio is the cost of the object-store
protocol (listing, conditional puts, one request per file), not of a network: a real store
adds a round trip (10-50 ms to S3 in-region) to each request counted here.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench import dataset
from bench.harness import BIN, GluonHome, Proc, Workspace, note, run_process
from bench.items import NO_WAIT, OFFLOAD

REQUEST = re.compile(r'"(GET|PUT|POST|HEAD|DELETE) ')


@dataclass(slots=True)
class StoreHome(GluonHome):
    """An ``OFFLOAD_HOME`` whose lake root is a bucket of the S3-compatible server."""

    store_env: dict[str, str] | None = None
    lake_root: str = ""

    @property
    def env(self) -> dict[str, str]:
        env = GluonHome.env.fget(self)  # type: ignore[attr-defined]
        env.update(self.store_env or {}, OFFLOAD_LAKE_ROOT=self.lake_root)
        return dict(env)


def _requests(log: Path | None, since: int) -> tuple[int, dict[str, int]]:
    """(the log's length now, requests by method after byte ``since``); nothing without a log."""
    if log is None:
        return 0, {}
    text = log.read_bytes()
    counts = Counter(REQUEST.findall(text[since:].decode(errors="replace")))
    return len(text), dict(sorted(counts.items()))


def _gluon_query(home: GluonHome, statement: str) -> Proc:
    return run_process([str(BIN / "gluon"), "query", "--json", statement], env=home.env)


def _operations(
    home: GluonHome, url: str, changes: int, log: Path | None
) -> dict[str, tuple[Proc, dict[str, int]]]:
    """Offload, extract, compact in place, read the view with changes pending: each with the
    requests the store served while it ran (the operations run one after another)."""
    table = ("-t", dataset.QUALIFIED, "-x")
    steps = {
        "offload": lambda: home.offload(*OFFLOAD),
        "extraction": lambda: home.offload(*table, "--incremental-run-extraction"),
        "in-place compaction": lambda: home.offload(
            *table, "--incremental-run-compaction", NO_WAIT
        ),
        "view read": lambda: _gluon_query(
            home, f"SELECT COUNT(*) AS n, SUM(amount) AS total FROM {dataset.QUALIFIED}"
        ),
    }
    before = {"extraction": changes, "view read": changes}
    done: dict[str, tuple[Proc, dict[str, int]]] = {}
    for operation, run in steps.items():
        if operation in before:
            dataset.update_first(url, before[operation])
        if operation == "view read":  # changes pending in the delta table, not compacted
            home.offload(*table, "--incremental-run-extraction")
        mark, _ = _requests(log, 0)
        proc = run()
        done[operation] = (proc, _requests(log, mark)[1])
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--changes", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)

    from support.s3 import S3Server

    root = Path(tempfile.mkdtemp(prefix="gluon-bench-s3-"))
    moto_log = root / "moto.log"
    store = S3Server(log=moto_log)
    best: dict[str, dict[str, tuple[Proc, dict[str, int]]]] = {"local": {}, "s3": {}}
    with Workspace(root / "work") as workspace:
        store.start()
        try:
            for round_ in range(args.repeats):
                for side in ("local", "s3"):  # interleaved: load changes hit both sides
                    name = f"{side}{round_}"
                    url = workspace.server.create_database(name)
                    dataset.create_items(url, args.rows, args.partitions)
                    home: GluonHome = workspace.home(name, url)
                    log = None
                    if side == "s3":
                        bucket = store.create_bucket()
                        home = StoreHome(home.path, url, store.env(), f"s3://{bucket}/lake")
                        log = moto_log
                    for operation, measured in _operations(home, url, args.changes, log).items():
                        kept = best[side].get(operation)
                        if kept is None or measured[0].seconds < kept[0].seconds:
                            best[side][operation] = measured
                    note(f"round {round_ + 1}, {side} lake: done")
        finally:
            store.stop()
    _print(best, args)
    return 0


def _print(
    best: dict[str, dict[str, tuple[Proc, dict[str, int]]]], args: argparse.Namespace
) -> None:
    print(
        f"\nbench.object_store: {args.rows:,} rows in {args.partitions} partitions, "
        f"{args.changes:,} changes; the fastest of {args.repeats} rounds each"
    )
    print(f"{'operation':<22}{'local s':>9}{'S3 s':>9}{'ratio':>7}  S3 requests")
    for operation, (local, _) in best["local"].items():
        remote, requests = best["s3"][operation]
        print(
            f"{operation:<22}{local.seconds:>9.2f}{remote.seconds:>9.2f}"
            f"{remote.seconds / local.seconds:>7.2f}  {json.dumps(requests)}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
