"""Everything a compaction step reads: the run, the table's records, a lazy lake session."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from gluon.compact.options import CompactionOptions
from gluon.config import Settings
from gluon.errors import StateError
from gluon.lake import sql, tables
from gluon.lake.changes import view_sql
from gluon.lake.session import LakeSession, open_session
from gluon.methods import get_method
from gluon.methods.base import ExtractionMethod
from gluon.progress import Progress
from gluon.repo import OffloadedTable, Repository
from gluon.repo.common import now
from gluon.repo.compaction import CompactionRun, ObsoleteObject
from gluon.repo.incremental import IncrementalState


class CompactionStopped(Exception):
    """The command was asked to stop (the service's SIGTERM): the run ends between steps
    or during a wait, and the next compaction of the table resumes it."""


def _never() -> bool:
    return False


STOP_CHECK_SECONDS = 1.0
"""How often a waiting compaction checks whether it is asked to stop."""


@dataclass(slots=True)
class CompactionContext:
    settings: Settings
    repo: Repository
    options: CompactionOptions
    run: CompactionRun
    record: OffloadedTable
    state: IncrementalState
    progress: Progress
    waiting: Callable[[str], None] | None = None
    """Receives what the compaction waits for, while it waits (the terminal shows it)."""
    stopping: Callable[[], bool] = _never
    """True once the command is asked to stop: no next step, no longer wait."""
    changes_shipped: int = 0
    """Changes the acknowledging extraction this compaction ran took from the source."""
    stack: ExitStack = field(default_factory=ExitStack)
    _session: LakeSession | None = None
    _session_stack: ExitStack = field(default_factory=ExitStack)

    @property
    def method(self) -> type[ExtractionMethod]:
        return get_method(self.state.method)

    def refresh(self) -> None:
        """Re-read the run and the table's records (other processes change them)."""
        run = self.repo.compaction.get_run(self.run.id)
        record = self.repo.get_table(self.record.table_key)
        state = self.repo.incremental.get_state(self.record.table_key)
        if run is None or record is None or state is None:
            raise StateError(
                f"the repository records of compaction run {self.run.id} of "
                f"{self.record.table_key} are gone: another command changed them"
            )
        self.run, self.record, self.state = run, record, state

    def save_progress(self, **values: Any) -> None:
        """Merge ``values`` into the run's progress (what a resumed step can skip)."""
        progress = {**self.run.progress, **values}
        self.repo.compaction.update_run(self.run.id, progress=progress)
        self.refresh()

    def record_retained(
        self, kind: str, name: str, location: str, *, version: int | None = None
    ) -> None:
        """Record an object this run keeps (once: a resumed run records it again); with
        ``version``, that version of the Delta table at ``location``."""
        self.repo.compaction.retain(
            ObsoleteObject(
                table_key=self.record.table_key,
                kind=kind,
                name=name,
                location=location,
                retained_at=now(),
                compaction_run_id=self.run.id,
                enablement_id=self.state.enablement_id,
                delta_version=version,
            )
        )

    def pause(self, seconds: float) -> None:
        """Sleep ``seconds``, checking every second whether the command is asked to stop.

        Raises:
            CompactionStopped: it is (the wait is left for the resumed run: waits count from
                recorded times).
        """
        until = time.monotonic() + seconds
        while not self.stopping():
            remaining = until - time.monotonic()
            if remaining <= 0:
                return
            time.sleep(min(remaining, STOP_CHECK_SECONDS))
        raise CompactionStopped

    def report_waiting(self, message: str) -> None:
        """Tell whoever runs the compaction what it waits for (and for how long)."""
        if self.waiting is not None:
            self.waiting(message)

    def lake(self) -> LakeSession:
        """The lake session, opened on first use, with the base and delta tables registered."""
        if self._session is None:
            self._session_stack = ExitStack()
            self.stack.callback(self._session_stack.close)
            self._session = self._session_stack.enter_context(open_session(self.settings))
            tables.register_table(self._session, self.record.base_table, self.record.base_path)
            tables.register_table(self._session, self.state.delta_table, self.state.delta_path)
        return self._session

    def release_session(self) -> None:
        """Close the lake session; the next :meth:`lake` opens a new one.

        The embedded engine ends a session idle for 15 minutes, so none is kept across a
        wait: the runner releases it after every step, and waiting steps before they wait.
        """
        self._session_stack.close()
        self._session = None

    # Inputs are read as they are now, not pinned with VERSION AS OF: Sail cannot time-travel
    # to a version older than the table's latest checkpoint. Every method reads its inputs
    # before it changes them (in-place stages the compacted rows first), so re-runs still
    # write the same rows.

    @property
    def base_relation(self) -> str:
        return sql.quote(self.record.base_table)

    @property
    def delta_relation(self) -> str:
        """The delta table; its compacted partitions are static once diversion is acknowledged."""
        return sql.quote(self.state.delta_table)

    @property
    def min_partition(self) -> int:
        return int(self.run.progress["min_partition"])

    @property
    def max_partition(self) -> int:
        if self.run.compacted_partition is None:
            raise StateError(
                f"compaction run {self.run.id} has not recorded the partition it compacts"
            )
        return self.run.compacted_partition

    @property
    def truncated(self) -> bool:
        """The compacted control partitions may hold a TRUNCATE: the merge applies it, and
        every base partition is rewritten (a TRUNCATE empties those without changes too)."""
        return self.state.truncates_from(self.min_partition)

    def merged_select(self, base: str | None = None) -> str:
        """Base rows with the compacted changes applied, plus the lake partition columns."""
        merged = view_sql(
            self.method.view_kind.value,
            columns=self.record.columns,
            keys=self.state.key_columns,
            base=base or self.base_relation,
            delta=self.delta_relation,
            min_partition=self.min_partition,
            max_partition=self.max_partition,
            truncated=self.truncated,
        )
        derived = [(part.expression, part.lake_column) for part in self.record.partitioning]
        return sql.with_columns(sql.subquery(merged, "gl_merged"), derived)
