"""Continuous mode: a table extracted as its changes commit, not on an interval.

Each continuous table gets its own thread. It asks the table's feed whether a change is
waiting (``nothing_waiting``: one cheap count for a changelog, a peek for a slot) every
``poll_interval`` and, when one is, runs a normal extraction (``run_extraction`` through
the service's ``_run``: the same lock, run row, exactly-once commit and fault points as
any other run). The lock is held per batch only, so compaction, status and cron commands
interleave. Batches are small and frequent, so their files pile up (in the delta table;
in merge mode IMMEDIATE, in the base): a second thread compacts the table when the
batches added more than ``fold_files`` data files since the loop started or the last
fold ended, while the loop goes on (compaction diverts new changes; the next batch
acknowledges the diversion).

A fold and the table's scheduled ``[compaction]`` take turns (:class:`CompactionTurns`):
a fold is not started while a scheduled compaction runs (it is looked at again 5 s
later), and a scheduled compaction due while a fold runs waits for it and then runs.
Neither meets the other's lock (which reported ``skipped_locked``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from gluon.compact.options import CompactionOptions
from gluon.config import Settings
from gluon.errors import GluonError
from gluon.lake.storage import data_files
from gluon.repo import Repository
from gluon.service.config import TableConfig
from gluon.states import MergeMode

log = logging.getLogger(__name__)

FOLD_CHECK_SECONDS = 5.0
"""How often a continuous table's delta file count is read (one Delta log read)."""
FOLD_WAIT_MINUTES = 1.0
"""How long a fold waits for queries on the replaced tables, when the table's file sets
no compaction options of its own."""

TURN_WAIT_SECONDS = 0.5
"""How often a scheduled compaction waiting for a fold looks whether the service stops."""

Extract = Callable[[TableConfig, threading.Event], bool]
"""One extraction attempt of a table; True when it shipped changes."""
Waiting = Callable[[str], bool]
"""Whether the table's feed may have a change waiting (False: surely nothing)."""
Fold = Callable[[CompactionOptions, threading.Event], None]
Files = Callable[[str], int | None]


class CompactionTurns:
    """One compaction of a table at a time in this service: a continuous loop's fold or the
    table's scheduled compaction."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._turns: dict[str, threading.Lock] = {}

    def _turn(self, table_key: str) -> threading.Lock:
        with self._guard:
            return self._turns.setdefault(table_key, threading.Lock())

    def busy(self, table_key: str) -> bool:
        return self._turn(table_key).locked()

    def try_take(self, table_key: str) -> bool:
        """Take the table's turn if it is free (a fold: it does not wait)."""
        return self._turn(table_key).acquire(blocking=False)

    def take(self, table_key: str, stop: threading.Event) -> bool:
        """Wait for the table's turn (a scheduled compaction); False: ``stop`` came first."""
        turn = self._turn(table_key)
        while not turn.acquire(timeout=TURN_WAIT_SECONDS):
            if stop.is_set():
                return False
        return True

    def give_back(self, table_key: str) -> None:
        self._turn(table_key).release()


def fold(settings: Settings, options: CompactionOptions, stop: threading.Event) -> None:
    """One fold: a compaction with ``options`` (stops between steps when ``stop`` is set)."""
    from gluon.compact import run_compaction

    result = run_compaction(
        settings,
        options,
        warn=lambda message: log.warning("%s: %s", options.table.key, message),
        waiting=lambda message: log.info("%s", message),
        stopping=stop.is_set,
    )
    log.info("%s: fold: %s", options.table.key, result.message)


def batch_files(settings: Settings, table_key: str) -> int | None:
    """The data files the table's batches add to: the delta table's, in merge mode
    IMMEDIATE the base's (None: no such table)."""
    repo = Repository(settings.repo_url)
    state = repo.incremental.get_state(table_key)
    if state is None:
        return None
    if state.merge_mode == MergeMode.IMMEDIATE.value:
        record = repo.get_table(table_key)
        return None if record is None else data_files(record.base_path)
    return data_files(state.delta_path)


def fold_options(table: TableConfig) -> CompactionOptions:
    """How a fold compacts: the table's own compaction options, else the defaults with a
    short wait for queries (a fold runs often)."""
    if table.compaction is not None:
        return table.compaction.options
    return CompactionOptions(table=table.ref, wait_minutes=FOLD_WAIT_MINUTES)


class ContinuousTable:
    """The loop of one continuous table; ``start`` it, set ``stop``, then ``join``."""

    def __init__(
        self,
        table: TableConfig,
        *,
        extract: Extract,
        waiting: Waiting,
        fold: Fold,
        files: Files,
        stop: threading.Event,
        turns: CompactionTurns | None = None,
    ) -> None:
        self.table = table
        self._turns = turns or CompactionTurns()
        self._extract = extract
        self._waiting = waiting
        self._fold = fold
        self._files = files
        self._stop = stop
        self._folding: threading.Thread | None = None
        self._fold_checked = 0.0
        self._baseline: int | None = None
        """The file count when the loop started or the last fold ended: a fold starts when
        the batches added more than ``fold_files`` since."""
        self.batches = 0
        self.folds = 0
        self._thread = threading.Thread(
            target=self._loop, name=f"gluon-continuous-{table.key}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        """Wait for the loop (it ends after its current batch's commit) and a running fold
        (it ends before its next step or in its wait: the next one resumes it)."""
        self._thread.join()
        folding = self._folding
        if folding is not None:
            folding.join()

    def _loop(self) -> None:
        first = True
        while not self._stop.is_set():
            try:
                # The first pass is a full run (it checks the capture and the columns).
                if first or self._waiting(self.table.key):
                    shipped = self._extract(self.table, self._stop)
                    first = False
                    self.batches += shipped
                    if shipped:
                        self._maybe_fold()
                        continue  # more may have committed meanwhile: look again at once
                else:
                    self._maybe_fold()
            except Exception:  # the loop must outlive one failed attempt: logged, retried
                log.exception("continuous extraction of %s failed", self.table.key)
            self._stop.wait(self.table.poll_seconds)

    def _maybe_fold(self) -> None:
        now = time.monotonic()
        if now - self._fold_checked < FOLD_CHECK_SECONDS:
            return
        self._fold_checked = now
        if self._folding is not None and self._folding.is_alive():
            return
        files = self._files(self.table.key)
        if files is None:
            return
        if self._baseline is None:
            self._baseline = files
        if files - self._baseline <= self.table.fold_files:
            return
        if not self._turns.try_take(self.table.key):
            log.debug("%s: a scheduled compaction is running: no fold now", self.table.key)
            return
        log.info(
            "%s: %d files, %d more than after the last fold (fold_files %d): compacting",
            self.table.key,
            files,
            files - self._baseline,
            self.table.fold_files,
        )
        self._folding = threading.Thread(
            target=self._run_fold, name=f"gluon-fold-{self.table.key}", daemon=True
        )
        self._folding.start()

    def _run_fold(self) -> None:
        try:
            self._fold(fold_options(self.table), self._stop)
            self.folds += 1
            # What a fold leaves (a big base keeps its many files) is the new starting point.
            self._baseline = self._files(self.table.key)
        except GluonError as exc:
            log.warning("%s: folding the small files failed: %s", self.table.key, exc)
        except Exception:
            log.exception("%s: folding the small files failed unexpectedly", self.table.key)
        finally:
            self._turns.give_back(self.table.key)
