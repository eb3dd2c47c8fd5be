"""PG_LOGICAL through the shared slot against CHANGELOG, each lake on a cluster of its own
(issue 33 item 2): ``bench.logical``'s figure without the other lake's WAL in the slot's.

In ``bench.logical`` the lakes share one cluster, so a slot also decodes the WAL the other
lakes wrote (skipped, but read). Here the shared-slot lake and the CHANGELOG lake each get
their own PostgreSQL cluster; the same N single-row UPDATEs (``bench.logical._update``)
are extracted by the real ``offload`` command, rounds interleaved. Per run: wall seconds,
the ``offload`` process's CPU seconds (with its children) and the extraction's own
seconds (the repository's ``extraction_runs``)::

    python -m bench.logical_apart --changes 100000 1000000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from bench import logical
from bench.harness import Workspace, note
from bench.scales import SCALES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.logical_apart", description=__doc__)
    parser.add_argument("--scale", choices=sorted(SCALES), default="small")
    parser.add_argument("--changes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    scale = SCALES[args.scale]
    runs: dict[str, list[dict[str, float]]] = {}
    with ExitStack() as stack:
        lakes = {}
        for way in (logical.SHARED_SLOT, logical.CHANGELOG):
            workspace = stack.enter_context(Workspace(Path(tempfile.mkdtemp(prefix="gluon-"))))
            lakes[way.label] = logical._build(workspace, way, scale)
        try:
            for count in args.changes:
                for _ in range(args.rounds):
                    for label, lake in lakes.items():
                        lake.home.restore("pristine")
                        assert logical._update(lake.url, count, scale.base_rows) == count
                        proc = lake.extract()
                        inner = lake.last_extraction()
                        assert inner["rows"] == count, (label, inner, count)
                        run = {
                            "wall_s": round(proc.seconds, 2),
                            "cpu_s": round(proc.cpu_seconds, 2),
                            "in_process_s": round(inner["seconds"], 2),
                        }
                        runs.setdefault(f"{count} {label}", []).append(run)
                        note(f"{count:,} {label}: {run}")
        finally:
            for lake in lakes.values():
                logical._drop_slots(lake.url)
                lake.drop()
    text = json.dumps({"scale": scale.name, "runs": runs}, indent=1)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
