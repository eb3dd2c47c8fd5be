"""One ``bench.items`` source table offloaded by gluon, and the gluon commands run on it.

Built once per size: the source table comes from ``generate_series`` in
PostgreSQL, then the real ``offload`` command copies it to the lake with the
CHANGELOG method enabled (lake base partitioned on ``part``). The lake and the
repository are then saved as ``pristine``; every experiment restores them and
applies its own changes in the source, so each starts from the same state.
"""

from __future__ import annotations

import datetime as dt
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import dataset
from bench.harness import GluonHome, Proc, Workspace, note, worker

TABLE_KEY = "BENCH.ITEMS"
OFFLOAD = (
    "-t",
    dataset.QUALIFIED,
    "-x",
    "--partition-columns=part",
    "--incremental-updates-enabled",
    "--incremental-extraction-method=CHANGELOG",
)
METHOD_FLAGS: dict[str, tuple[str, ...]] = {
    "in-place": (),
    "full": ("--incremental-full-compaction",),
    "partition-wise full": ("--incremental-partition-wise-full-compaction",),
}
NO_WAIT = "--incremental-wait-time=0"
"""Old objects dropped at once: nothing reads the bench's tables during a compaction."""


@dataclass(slots=True)
class Compaction:
    """A gluon compaction: the first invocation (stops at the acknowledgement step), an
    extraction that acknowledges, and the invocation that finishes."""

    method: str
    start: Proc
    acknowledge: Proc
    finish: Proc
    steps: dict[str, float] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return self.start.seconds + self.finish.seconds

    @property
    def peak_rss_mb(self) -> float:
        return max(self.start.peak_rss_mb, self.finish.peak_rss_mb)


@dataclass(slots=True)
class ItemsLake:
    workspace: Workspace
    name: str
    url: str
    home: GluonHome
    rows: int
    partitions: int
    create_seconds: float = 0.0
    offload: Proc | None = None

    @classmethod
    def build(
        cls,
        workspace: Workspace,
        name: str,
        rows: int,
        partitions: int,
        extra_flags: tuple[str, ...] = (),
    ) -> ItemsLake:
        url = workspace.server.create_database(name)
        create_seconds = dataset.create_items(url, rows, partitions)
        home = workspace.home(name, url)
        lake = cls(workspace, name, url, home, rows, partitions, create_seconds)
        lake.offload = home.offload(*OFFLOAD, *extra_flags)
        note(
            f"{name}: {rows:,} rows generated in {create_seconds:.1f} s, offloaded in "
            f"{lake.offload.seconds:.1f} s"
        )
        home.save("pristine")
        return lake

    def drop(self) -> None:
        self.home.discard()
        self.workspace.server.drop_database(self.name)

    # -- what the repository says ------------------------------------------------------------

    def _repo(self, sql: str) -> list[Any]:
        with sqlite3.connect(self.home.path / "repo" / "gluon.db") as db:
            return db.execute(sql).fetchall()

    @property
    def base_path(self) -> str:
        return str(self._repo("SELECT base_path FROM offloaded_tables")[0][0])

    @property
    def delta_path(self) -> str:
        return str(self._repo("SELECT delta_path FROM incremental_state")[0][0])

    @property
    def changelog(self) -> str:
        import json

        objects = json.loads(self._repo("SELECT source_objects_json FROM incremental_state")[0][0])
        item = next(o for o in objects if o["kind"] == "changelog_table")
        return f"{item['schema']}.{item['name']}"

    def last_extraction(self) -> dict[str, Any]:
        started, finished, rows = self._repo(
            "SELECT started_at, finished_at, rows_read FROM extraction_runs "
            "ORDER BY id DESC LIMIT 1"
        )[0]
        return {"seconds": _seconds(started, finished), "rows": rows}

    def last_compaction_steps(self) -> dict[str, float]:
        rows = self._repo(
            "SELECT step, started_at, finished_at FROM compaction_steps WHERE run_id = "
            "(SELECT MAX(id) FROM compaction_runs) AND status = 'success' ORDER BY id"
        )
        return {step: _seconds(started, finished) for step, started, finished in rows}

    # -- gluon commands ------------------------------------------------------------------------

    def extract(self) -> Proc:
        return self.home.offload("-t", dataset.QUALIFIED, "-x", "--incremental-run-extraction")

    def compact(self, method: str) -> Compaction:
        flags = METHOD_FLAGS[method]
        common = ("-t", dataset.QUALIFIED, "-x", "--incremental-run-compaction", *flags)
        # The wait time is a run's own option (a resumed run keeps it): give it from the start.
        start = self.home.offload(*common, "--incremental-terminate-compaction", NO_WAIT)
        acknowledge = self.extract()
        finish = self.home.offload(*common, NO_WAIT)
        if "complete" not in finish.stdout:
            raise RuntimeError(f"compaction did not complete: {finish.stdout}")
        return Compaction(method, start, acknowledge, finish, self.last_compaction_steps())

    def count(self) -> int:
        """Rows in the user view (a correctness check after a compaction)."""
        proc = worker("count", "--table", dataset.QUALIFIED, env=self.home.env)
        return int(proc.result["rows"])

    # -- raw baselines ---------------------------------------------------------------------------

    def raw_extract(self, target: Path) -> Proc:
        """Read the changelog rows gluon is about to extract and append them to a Delta table."""
        columns = "id, part, grp, amount, label, updated_at, gl_seq, gl_op"
        return worker(
            "load",
            "--url",
            dataset.libpq_url(self.url),
            "--query",
            f"SELECT {columns} FROM {self.changelog} ORDER BY gl_seq",
            "--target",
            str(target),
            "--changes",
        )

    def raw_immediate_merge(self, scratch: Path) -> Proc:
        """Read the changelog and merge its latest change per key into a copy of the base with
        deltalake (the copy is not timed)."""
        copy = scratch / "immediate_base"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(self.base_path, copy)
        columns = "id, part, grp, amount, label, updated_at, gl_seq, gl_op"
        try:
            return worker(
                "deltamerge",
                "--url",
                dataset.libpq_url(self.url),
                "--query",
                f"SELECT {columns} FROM {self.changelog}",
                "--base",
                str(copy),
            )
        finally:
            shutil.rmtree(copy, ignore_errors=True)

    def raw_offload(self, target: Path) -> Proc:
        """Read the whole source table into a partitioned Delta table, as the offload does."""
        return worker(
            "load",
            "--url",
            dataset.libpq_url(self.url),
            "--query",
            f"SELECT id, part, grp, amount, label, updated_at FROM {dataset.QUALIFIED}",
            "--target",
            str(target),
            "--partitioned",
            "--overwrite",
        )

    def raw_merge(self, scratch: Path) -> Proc:
        """MERGE INTO a copy of the base (the copy is not timed)."""
        copy = scratch / "merge_base"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(self.base_path, copy)
        try:
            return worker("merge", "--base", str(copy), "--changes", self.delta_path, "--count")
        finally:
            shutil.rmtree(copy, ignore_errors=True)

    def raw_rewrite(self, scratch: Path) -> Proc:
        """The merged result written as a new partitioned table (overwrite, like a CTAS)."""
        target = scratch / "rewritten"
        shutil.rmtree(target, ignore_errors=True)
        try:
            return worker(
                "rewrite",
                "--base",
                self.base_path,
                "--changes",
                self.delta_path,
                "--target",
                str(target),
            )
        finally:
            shutil.rmtree(target, ignore_errors=True)


def _seconds(started: str | None, finished: str | None) -> float:
    if not started or not finished:
        return 0.0
    return (
        dt.datetime.fromisoformat(finished) - dt.datetime.fromisoformat(started)
    ).total_seconds()
