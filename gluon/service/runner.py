"""The service: due extractions and compactions of many tables, a few at a time, in one
process (one warm engine), until asked to stop.

Each run is what the cron command would do (``run_extraction``, ``run_compaction``,
the same locks): a table locked by a cron command is skipped this round, a failed
run is logged, counted and tried again at its next interval. On stop, no new run
starts; a running extraction ends after its current batch's commit, a running
compaction ends before its next step or in its wait (each step is recorded: the
next compaction, after the restart, resumes it).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field, replace
from functools import partial

from gluon.config import EngineKind, Settings
from gluon.errors import GluonError, LockHeldError, UsageError
from gluon.extract import shared_pass
from gluon.lake.session import first_line, open_session
from gluon.repo import Repository
from gluon.repo.common import now as repository_now
from gluon.reuse import kept_connections
from gluon.service.checks import FLUSH_SECONDS, EmptyCheckCounter
from gluon.service.config import ServiceConfig, TableConfig
from gluon.service.continuous import CompactionTurns, ContinuousTable, batch_files, fold
from gluon.service.lag import table_lag
from gluon.service.metrics import ServiceMetrics
from gluon.service.passes import Run, in_passes
from gluon.service.schedule import Action, LastRuns, TableSchedule, due_runs
from gluon.service.slots import SlotTurns, reads_a_slot, shares_a_stream
from gluon.status.changelog_counter import ChangelogCounter

log = logging.getLogger(__name__)

Clock = Callable[[], dt.datetime]

TICK_SECONDS = 0.5
"""How often the scheduler looks for due runs (in memory: no query)."""
LAG_REFRESH_SECONDS = 15.0
"""How often the lag gauges are read again (with ``--metrics-port``)."""
SLOT_TURN_SECONDS = 30.0
"""How long the lag reader waits for running slot extractions before keeping the last
value of a slot table's gauges."""
FULL_RUN_SECONDS = 300.0
"""A table whose feed counts nothing waiting is still given a full extraction run this
often (which compares the source's columns and checks the capture objects); a busy table's
runs check its capture objects this often too, not every run."""


class Outcome:
    SUCCESS = "success"
    NOTHING_TO_DO = "nothing_to_do"
    LOCKED = "skipped_locked"
    STOPPED = "stopped"
    """A compaction asked to stop between steps or in a wait (resumed after the restart)."""
    FAILED = "failed"


@dataclass(slots=True)
class RunReport:
    table_key: str
    action: Action
    started: dt.datetime
    outcome: str = Outcome.SUCCESS
    shipped: int = 0
    """Changes taken from the source (``ExtractionResult.rows_read``): what status, the
    report and ``gluon_service_changes_shipped_total`` count."""
    written: int = 0
    """What the lake got of them (fewer: merged per key, already there, refused)."""
    compacted: int = 0
    run_id: int | None = None
    """The repository's id of the extraction or compaction run (the id every surface shows)."""
    seconds: float = 0.0
    detail: str = ""
    compaction_unfinished: bool = False

    @property
    def failed(self) -> bool:
        return self.outcome == Outcome.FAILED

    def line(self) -> str:
        """The run's one log line."""
        counts = (
            f"shipped={self.shipped} written={self.written}"
            if self.action is Action.EXTRACTION
            else f"changes={self.compacted} shipped={self.shipped}"
        )
        run = "" if self.run_id is None else f" run_id={self.run_id}"
        text = (
            f"run: table={self.table_key} action={self.action.value} "
            f"outcome={self.outcome}{run} {counts} seconds={self.seconds:.2f}"
        )
        return f"{text}: {self.detail}" if self.detail else text


@dataclass(slots=True)
class ServiceTotals:
    runs: int = 0
    failures: int = 0
    skipped: int = 0
    shipped: int = 0
    by_outcome: dict[str, int] = field(default_factory=dict)

    def add(self, report: RunReport) -> None:
        self.runs += 1
        self.failures += report.failed
        self.skipped += report.outcome == Outcome.LOCKED
        self.shipped += report.shipped
        self.by_outcome[report.outcome] = self.by_outcome.get(report.outcome, 0) + 1


def check_tables(settings: Settings, config: ServiceConfig) -> None:
    """Refuse a file naming a table the repository does not know (a typo would fail forever).

    Raises:
        UsageError: a table has no repository record.
    """
    repo = Repository(settings.repo_url)
    for table in config.tables:
        if repo.get_table(table.key) is None:
            raise UsageError(
                f"{config.path}: table {table.key}: not offloaded (the repository has no record "
                f"of it): offload it first with: offload -t {table.key} -x"
            )


def last_runs(repo: Repository, table_key: str) -> LastRuns:
    """Where the table's schedule starts: its latest runs in the repository."""
    extractions = repo.incremental.extraction_runs(table_key, limit=1)
    completed = repo.compaction.last_completed(table_key)
    verified = repo.verify_runs.latest(table_key)
    return LastRuns(
        extraction_started=extractions[0].started_at if extractions else None,
        compaction_started=completed.started_at if completed else None,
        compaction_unfinished=repo.compaction.open_run(table_key) is not None,
        verified=verified.verified_at if verified else None,
    )


class Service:
    """Runs due work until ``stop`` is set; see the module docstring."""

    def __init__(
        self,
        settings: Settings,
        config: ServiceConfig,
        *,
        parallel: int,
        metrics: ServiceMetrics | None = None,
        announce: Callable[[str], None] | None = None,
        clock: Clock = repository_now,
    ) -> None:
        self.settings = settings
        self.config = config
        self.parallel = parallel
        self.metrics = metrics
        self.announce = announce or (lambda line: None)
        self.clock = clock
        self.totals = ServiceTotals()
        self.checks = EmptyCheckCounter(settings.repo_url)
        self.slot_turns = SlotTurns()
        self.compaction_turns = CompactionTurns()
        """A continuous fold and the table's scheduled compaction take turns."""
        self._full_run_at: dict[str, float] = {}
        self._shipped_last: set[str] = set()
        """Tables whose last extraction shipped changes: under load more are waiting, so the
        next run skips the count that would only say so (``nothing_waiting``)."""
        self._shares_a_stream: dict[str, bool] = {}
        """Tables whose extraction reads a stream shared with others (a shared slot), as
        their last extraction found: their due extractions run in a row (``passes``)."""
        self._totals_lock = threading.Lock()
        """Continuous loops count their runs from their own threads."""

    def run(self, stop: threading.Event) -> ServiceTotals:
        """Run until ``stop`` is set. Repository and source connections are kept for the
        service's life (``gluon.reuse``): each worker thread holds its own few."""
        with kept_connections():
            try:
                return self._serve(stop)
            finally:
                self.checks.flush()

    def _serve(self, stop: threading.Event) -> ServiceTotals:
        repo = Repository(self.settings.repo_url)
        now = self.clock()
        schedules = [
            TableSchedule.start(table, last_runs(repo, table.key), now)
            for table in self.config.tables
        ]
        if self.metrics is not None:
            for table in self.config.tables:
                actions = [Action.EXTRACTION.value]
                if table.compaction is not None:
                    actions.append(Action.COMPACTION.value)
                if table.verify is not None:
                    actions.append(Action.VERIFY.value)
                self.metrics.declare(table.key, actions)
            threading.Thread(
                target=self._refresh_lag, args=(stop,), name="gluon-lag", daemon=True
            ).start()
        self._warm_engine()
        loops = self._start_continuous(stop)
        continuous = {
            (table.key, Action.EXTRACTION) for table in self.config.tables if table.continuous
        }
        running: dict[Future[list[RunReport]], list[Run]] = {}
        flushed = time.monotonic()
        with ThreadPoolExecutor(self.parallel, thread_name_prefix="gluon-run") as pool:
            while not stop.is_set():
                if time.monotonic() - flushed >= FLUSH_SECONDS:
                    self.checks.flush()
                    flushed = time.monotonic()
                now = self.clock()
                busy = {
                    (schedule.table.key, action)
                    for runs in running.values()
                    for schedule, action in runs
                }
                busy |= continuous  # their own loops extract them
                busy |= {  # a fold runs: the scheduled compaction waits for its end
                    (table.key, Action.COMPACTION)
                    for table in self.config.tables
                    if table.continuous and self.compaction_turns.busy(table.key)
                }
                chosen = due_runs(schedules, now, busy, self.parallel - len(running))
                for runs in in_passes(chosen, schedules, busy, self._shares_a_stream, now):
                    running[pool.submit(self._run_pass, runs, now, stop)] = runs
                if running:
                    done, _ = wait(list(running), timeout=TICK_SECONDS, return_when=FIRST_COMPLETED)
                    for future in done:
                        self._passed(running.pop(future), future.result())
                else:
                    stop.wait(TICK_SECONDS)
            if running:
                log.info("stopping: waiting for %d running runs to end", len(running))
            for future in list(running):
                self._passed(running.pop(future), future.result())
        for loop in loops:
            loop.join()
        return self.totals

    def _start_continuous(self, stop: threading.Event) -> list[ContinuousTable]:
        """One loop per continuous table (``gluon.service.continuous``)."""
        loops = [
            ContinuousTable(
                table,
                extract=self._continuous_batch,
                waiting=self._change_waiting,
                fold=partial(fold, self.settings),
                files=partial(batch_files, self.settings),
                stop=stop,
                turns=self.compaction_turns,
            )
            for table in self.config.tables
            if table.continuous
        ]
        for loop in loops:
            loop.start()
        return loops

    def _continuous_batch(self, table: TableConfig, stop: threading.Event) -> bool:
        report = self._run(table, Action.EXTRACTION, self.clock(), stop, quiet_empty=True)
        if report.outcome != Outcome.NOTHING_TO_DO:
            with self._totals_lock:
                self.totals.add(report)
                if self.metrics is not None:
                    self.metrics.run_ended(
                        report.table_key,
                        Action.EXTRACTION.value,
                        report.outcome,
                        report.failed,
                        report.shipped,
                    )
        return report.shipped > 0

    def _change_waiting(self, table_key: str) -> bool:
        from gluon.extract.run import nothing_waiting

        return not nothing_waiting(self.settings, table_key)

    def _warm_engine(self) -> None:
        """Start the embedded engine before the first run needs it (it stays up)."""
        if self.settings.engine is not EngineKind.SAIL:
            return
        try:
            with open_session(self.settings):
                pass
        except GluonError as exc:  # each run reports it again, as its own failure
            log.warning("the lake engine did not start: %s", exc)

    def _run_pass(
        self, runs: list[Run], started: dt.datetime, stop: threading.Event
    ) -> list[RunReport]:
        """One run, or shared-stream members' extractions in a row from one decoding (each
        its own run; none starts once ``stop`` is set)."""
        if len(runs) == 1:
            schedule, action = runs[0]
            return [self._run(schedule.table, action, started, stop)]
        reports: list[RunReport] = []
        with shared_pass.one_decoding():
            for schedule, action in runs:
                if reports and stop.is_set():
                    break
                reports.append(self._run(schedule.table, action, started, stop))
        return reports

    def _passed(self, runs: list[Run], reports: list[RunReport]) -> None:
        for started, report in zip(runs, reports, strict=False):  # fewer: stopped in a pass
            self._ended(started, report)

    def _ended(self, started: Run, report: RunReport) -> None:
        schedule, action = started
        if action is Action.EXTRACTION:
            schedule.extraction_ran(report.started)
        elif action is Action.VERIFY:
            schedule.verify_ran(report.started, completed=report.outcome == Outcome.SUCCESS)
        else:
            schedule.compaction_ran(
                report.started,
                completed=report.outcome == Outcome.SUCCESS,
                unfinished=report.compaction_unfinished,
            )
        with self._totals_lock:
            self.totals.add(report)
            if self.metrics is not None:
                self.metrics.run_ended(
                    report.table_key, action.value, report.outcome, report.failed, report.shipped
                )

    def _run(
        self,
        table: TableConfig,
        action: Action,
        started: dt.datetime,
        stop: threading.Event,
        *,
        quiet_empty: bool = False,
    ) -> RunReport:
        report = RunReport(table.key, action, started)
        began = time.monotonic()
        try:
            if action is Action.EXTRACTION:
                self._extract(table, report, stop)
            elif action is Action.VERIFY:
                self._verify(table, report)
            else:
                self._compact(table, report, stop)
        except LockHeldError as exc:
            report.outcome, report.detail = Outcome.LOCKED, str(exc)
        except GluonError as exc:
            report.outcome, report.detail = Outcome.FAILED, str(exc)
            report.shipped = exc.changes_taken  # batches confirmed before the failure
        except Exception as exc:  # a run's bug must not end the service: logged with its trace
            log.exception("%s of %s failed unexpectedly", action.value, table.key)
            report.outcome = Outcome.FAILED
            report.detail = f"unexpected {type(exc).__name__}: {first_line(exc)}"
        if action is Action.COMPACTION and report.outcome != Outcome.SUCCESS:
            report.compaction_unfinished = self._compaction_open(table.key)
        report.seconds = time.monotonic() - began
        line = report.line()
        if quiet_empty and report.outcome == Outcome.NOTHING_TO_DO:
            log.debug("%s", line)  # a continuous loop's empty look: several a second
            return report
        if report.failed:
            log.error("%s", line)
        else:
            log.info("%s", line)
        self.announce(line)
        return report

    def _extract(self, table: TableConfig, report: RunReport, stop: threading.Event) -> None:
        from gluon.extract.run import nothing_waiting, run_extraction

        state = Repository(self.settings.repo_url).incremental.get_state(table.key)
        enablement = None if state is None else state.enablement_id
        self._shares_a_stream[table.key] = state is not None and shares_a_stream(state)
        full_run_due = time.monotonic() >= self._full_run_at.get(table.key, 0.0)
        known_busy = table.key in self._shipped_last
        if not full_run_due and not known_busy and nothing_waiting(self.settings, table.key):
            report.outcome, report.detail = Outcome.NOTHING_TO_DO, "nothing waiting"
            self.checks.checked(table.key, enablement, self.clock())
            return
        uses_slot = state is not None and reads_a_slot(state)
        with self.slot_turns.extracting() if uses_slot else nullcontext():
            result = run_extraction(
                self.settings,
                table.ref,
                batch_size=table.batch_size,
                stopping=stop.is_set,
                record_empty=False,
                check_capture=full_run_due,
            )
        if full_run_due:
            self._full_run_at[table.key] = time.monotonic() + FULL_RUN_SECONDS
        if result.rows_read:
            self._shipped_last.add(table.key)
        else:
            self._shipped_last.discard(table.key)
        report.shipped, report.written = result.rows_read, result.rows_written
        report.run_id = result.run_id if result.recorded else None
        if result.recorded:
            self.checks.shipped(table.key, self.clock())
        else:
            self.checks.checked(table.key, enablement, self.clock())
        if result.rows_read == 0:
            report.outcome = Outcome.NOTHING_TO_DO

    def _compact(self, table: TableConfig, report: RunReport, stop: threading.Event) -> None:
        from gluon.compact import run_compaction

        schedule = table.compaction
        assert schedule is not None
        # A fold started after this run was chosen: wait for it, then compact what is left.
        if not self.compaction_turns.take(table.key, stop):
            report.outcome, report.detail = Outcome.STOPPED, "stopped while a fold ran"
            return
        try:
            result = run_compaction(
                self.settings,
                schedule.options,
                warn=lambda message: log.warning("%s: %s", table.key, message),
                waiting=lambda message: log.info("%s", message),
                stopping=stop.is_set,
            )
        finally:
            self.compaction_turns.give_back(table.key)
        report.compacted, report.run_id = result.changes, result.run_id
        report.shipped = result.changes_shipped  # by the extraction that acknowledged
        if result.nothing_to_do:
            report.outcome, report.detail = Outcome.NOTHING_TO_DO, result.message
        elif result.stopped:
            report.outcome, report.detail = Outcome.STOPPED, result.message

    def _verify(self, table: TableConfig, report: RunReport) -> None:
        """``gluon verify -t`` of the table (recorded in ``verify_runs`` like the command's);
        differences are logged as a warning, the run itself succeeded."""
        from gluon.verify.render import line
        from gluon.verify.run import verify_table

        schedule = table.verify
        assert schedule is not None
        repo = Repository(self.settings.repo_url)
        record = repo.get_table(table.key)
        if record is None:
            raise UsageError(f"{table.key} is not offloaded: offload it first")
        verdict = verify_table(self.settings, repo, record, schedule.max_rows_per_second)
        report.detail = line(verdict)
        if not verdict.equal:
            log.warning("verify: %s", report.detail)

    def _compaction_open(self, table_key: str) -> bool:
        try:
            return Repository(self.settings.repo_url).compaction.open_run(table_key) is not None
        except GluonError:
            return True  # unknown: try to resume at the next attempt (resuming is safe)

    def _refresh_lag(self, stop: threading.Event) -> None:
        assert self.metrics is not None
        while not stop.is_set():
            try:
                repo = Repository(self.settings.repo_url)
                # A new counter each round: it remembers a failure to connect.
                counter = ChangelogCounter(self.settings.source_url, self.settings.source_timeouts)
                with shared_pass.one_decoding():  # a shared slot read once for its members
                    for table in self.config.tables:
                        self._read_lag(repo, table.key, counter)
            except Exception:  # gauges go stale, the service goes on
                log.warning("reading the lag of the tables failed", exc_info=True)
            stop.wait(LAG_REFRESH_SECONDS)

    def _read_lag(self, repo: Repository, table_key: str, counter: ChangelogCounter) -> None:
        """One table's gauges; a slot table's in the sole slot turn (``SlotTurns``)."""
        assert self.metrics is not None
        record = repo.get_table(table_key)
        state = repo.incremental.get_state(table_key)
        if record is None:
            return
        with ExitStack() as stack:
            slot_turn = state is not None and reads_a_slot(state)
            if slot_turn and not stack.enter_context(self.slot_turns.reading(SLOT_TURN_SECONDS)):
                return  # extractions kept the slot: the gauges keep their last value
            lag = table_lag(repo, record, counter, self.clock())
        latest = self.checks.latest(table_key)
        if latest is not None:
            since = max((self.clock() - latest).total_seconds(), 0.0)
            if lag.seconds_since_extraction is None or since < lag.seconds_since_extraction:
                lag = replace(lag, seconds_since_extraction=since)
        self.metrics.lag(table_key, lag)
