"""Verify one table at a consistent point.

The lake is brought up to the source first: an extraction under the normal lock ships
every change captured so far. Then each engine's bucket checksums are compared and only
differing buckets are read whole (``look``). A change committed after that extraction
shows as a difference, so differing keys are looked at again after another extraction: a
key is reported only once two looks in a row show it with the same rows on both sides
(the extraction between them shipped whatever was in flight).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from gluon.config import Settings
from gluon.errors import ExitCode, LakeError, LockHeldError, UsageError
from gluon.extract.run import run_extraction
from gluon.faults import fault_point
from gluon.lake.storage import missing_data_files
from gluon.methods.base import get_method
from gluon.naming import TableRef
from gluon.progress import NullProgress, Progress, ProgressTask
from gluon.repo import OffloadedTable, Repository
from gluon.repo.common import now
from gluon.repo.incremental import ENABLED
from gluon.repo.verify_runs import DIFFERENT, EQUAL, VerifyRun
from gluon.states import TableStatus
from gluon.verify.bisect import Checkpoint
from gluon.verify.canonical import Canonical
from gluon.verify.checksums import Meter, rebuild_hint
from gluon.verify.compare import Differences, diff
from gluon.verify.look import look
from gluon.verify.pace import Pace
from gluon.verify.sides import Shape
from gluon.verify.warm import EngineWarmUp

log = logging.getLogger(__name__)

LOCK_POLL_SECONDS = 1.0
"""How often verify tries the extraction lock again while ``--lock-wait`` lasts."""
LOOKS = 5
"""At most this many looks (each after an extraction) at keys a writer keeps changing."""


@dataclass
class Verdict:
    """One table's result."""

    table: str
    rows_compared: int = 0
    looks: int = 0
    differences: Differences = field(default_factory=Differences)
    bytes_moved: int = 0
    """Bytes read from the source into gluon: checksum rows and rows read whole."""
    buckets_compared: int = 0
    in_flight: int = 0
    """Keys that differed with other rows at every look (a writer keeps changing them):
    not reported as differences, and counted so the user knows they were not settled."""
    method: str | None = None
    """The extraction method, when it allows lake-only rows."""
    lake_only: list[Canonical] = field(default_factory=list)
    """Keys only the lake holds where the method allows it (data patching): not errors."""
    locked: str | None = None
    """Why the table was not verified (another command holds its lock), for ``--all``."""
    failed: str | None = None
    """Why the table could not be verified (an error reading a side), for ``--all``: the
    other tables are still verified and reported."""
    resumed_levels: int = 0
    """Bisection levels a killed earlier run finished and this one did not redo."""

    @property
    def equal(self) -> bool:
        return self.locked is None and self.failed is None and self.differences.count == 0


def check_selection(table: str | None, every: bool) -> None:
    """Refuse a command line that names no table, or a table and ``--all``."""
    if every == (table is not None):
        raise UsageError("name one table with -t SCHEMA.TABLE or every table with --all")


def tables_to_verify(repo: Repository, table: str | None, every: bool) -> list[OffloadedTable]:
    """The tables a command line names: one (``-t``) or every offloaded table (``--all``)."""
    check_selection(table, every)
    if table is not None:
        key = TableRef.parse(table).key
        record = repo.get_table(key)
        if record is None:
            raise UsageError(f"{key} is not offloaded: offload it first, or check the name")
        return [record]
    return [record for record in repo.list_tables() if record.status == TableStatus.OFFLOADED]


def verify_table(
    settings: Settings,
    repo: Repository,
    record: OffloadedTable,
    max_rows_per_second: int | None = None,
    lock_wait_seconds: float = 0.0,
    progress: Progress | None = None,
) -> Verdict:
    """Compare ``record``'s source rows with the lake's (read-only on both sides; the result is
    recorded in the repository). ``progress`` shows the checksum levels as they end (a bar at
    a terminal)."""
    # The engine starts while the extraction and the source's first pass run.
    warm_up = EngineWarmUp(settings)
    try:
        with (progress or NullProgress()).task(f"verifying {record.table_key}", None) as task:
            return _verify_table(
                settings, repo, record, max_rows_per_second, lock_wait_seconds, task
            )
    finally:
        warm_up.join()


def _verify_table(
    settings: Settings,
    repo: Repository,
    record: OffloadedTable,
    max_rows_per_second: int | None,
    lock_wait_seconds: float,
    task: ProgressTask,
) -> Verdict:
    state = repo.incremental.get_state(record.table_key)
    enabled = state is not None and state.status == ENABLED
    key_columns = state.key_columns if state is not None and enabled else record.primary_key
    shape = Shape.of(record, key_columns)
    verdict = Verdict(record.table_key)
    previous: Differences | None = None
    meter = Meter()
    pace = Pace(max_rows_per_second)
    recheck: dict[int, list[str]] | None = None
    for _ in range(LOOKS):
        start: Checkpoint | None = None
        taken_at = ""
        if enabled:
            extract_waiting(settings, record.table_key, lock_wait_seconds)
            if recheck is None:
                taken_at = lake_state(repo, record)
                start = resume_point(repo, record.table_key, taken_at)
                verdict.resumed_levels = start.levels if start is not None else 0

        def save(point: Checkpoint, taken_at: str = taken_at) -> None:
            if taken_at:  # only a captured table's lake state tells whether a resume is safe
                repo.verify_progress.save(record.table_key, taken_at, point.to_json())
            fault_point("verify.after_level")

        try:
            seen = look(
                settings,
                repo,
                record,
                shape,
                pace,
                meter,
                progress=lambda _level, _differing: task.advance(1),
                recheck=recheck,
                start=start,
                checkpoint=save,
            )
        except LakeError as exc:
            gone = lake_files_gone(repo, record)
            if gone is None:
                raise
            raise gone from exc
        recheck = seen.leaves  # later looks confirm these buckets, they do not search again
        found = diff(seen.source, seen.lake)
        verdict.looks += 1
        verdict.rows_compared = seen.rows_compared or verdict.rows_compared
        verdict.bytes_moved = meter.source_bytes
        verdict.buckets_compared = meter.buckets_compared
        if not enabled:
            verdict.differences = found  # nothing is captured, so nothing is in flight
            break
        settled = settled_keys(previous, found)
        verdict.differences = found.only(settled)
        verdict.in_flight = found.count - len(settled)
        if not verdict.in_flight:
            break
        log.info(
            "%s: %d keys differ, %d of them changed since the last look: looking again after "
            "an extraction",
            record.table_key,
            found.count,
            verdict.in_flight,
        )
        previous = found
    if state is not None and enabled and get_method(state.method).keeps_lake_only_rows:
        verdict.method = state.method
        verdict.lake_only = verdict.differences.extra_in_lake
        kept = set(verdict.differences.evidence) - set(verdict.lake_only)
        verdict.differences = verdict.differences.only(kept)
    for key, sides in list(verdict.differences.evidence.items())[:5]:
        log.info("%s: key %s: %s", record.table_key, key, _detail(record, sides))
    repo.verify_progress.clear(record.table_key)  # the search ended: nothing to resume
    repo.verify_runs.record(
        VerifyRun(
            table_key=record.table_key,
            verified_at=now(),
            result=EQUAL if verdict.equal else DIFFERENT,
            rows_compared=verdict.rows_compared,
            missing_in_lake=len(verdict.differences.missing_in_lake),
            extra_in_lake=len(verdict.differences.extra_in_lake),
            different_values=len(verdict.differences.different_values),
            in_flight=verdict.in_flight,
        )
    )
    return verdict


def lake_state(repo: Repository, record: OffloadedTable) -> str:
    """What the lake holds of the table, as far as gluon changes it: the capture's enablement,
    the last change shipped and the views' generation. A checkpoint saved at another state is
    not resumed (something was extracted or compacted since, so the buckets may differ)."""
    state = repo.incremental.get_state(record.table_key)
    assert state is not None
    return ":".join(
        str(part)
        for part in (
            state.enablement_id,
            state.shipped_seq,
            state.last_scn,
            state.view_generation,
            state.active_partition,
        )
    )


def lake_files_gone(repo: Repository, record: OffloadedTable) -> LakeError | None:
    """When reading the lake failed because its Delta tables name data files the storage no
    longer holds (deleted by hand, lost in a restore), the error that says so and what to do;
    None when every file is there (the failure was something else)."""
    state = repo.incremental.get_state(record.table_key)
    locations = [record.base_path] + ([state.delta_path] if state and state.delta_path else [])
    for location in locations:
        try:
            gone = missing_data_files(location)
        except Exception:  # the diagnosis must not hide the first error
            continue
        if gone:
            files = "data file that is" if len(gone) == 1 else "data files that are"
            first = gone[0].rsplit("/", 1)[-1]
            return LakeError(
                f"{record.table_key}: the lake's Delta table at {location} names {len(gone)} "
                f"{files} gone ({first}{', ...' if len(gone) > 1 else ''}): restore "
                f"{'it' if len(gone) == 1 else 'them'} from a backup, or "
                + rebuild_hint(record.table_key)
            )
    return None


def resume_point(repo: Repository, table_key: str, taken_at: str) -> Checkpoint | None:
    """The levels a killed verify finished at this lake state, or None (start again)."""
    saved = repo.verify_progress.load(table_key, taken_at)
    if saved is None:
        return None
    point = Checkpoint.from_json(saved)
    log.info(
        "%s: resuming a killed verify after its level %d (nothing was extracted since)",
        table_key,
        point.levels,
    )
    return point


def extract_waiting(settings: Settings, table_key: str, wait_seconds: float) -> None:
    """Run an extraction; while another command holds the table's lock, try again for up to
    ``wait_seconds`` (a running extraction usually ends within seconds).

    Raises:
        LockHeldError: the lock is still held after ``wait_seconds``.
    """
    give_up = time.monotonic() + wait_seconds
    while True:
        try:
            run_extraction(settings, TableRef.parse(table_key))
            return
        except LockHeldError:
            if time.monotonic() >= give_up:
                raise
            log.info("%s is locked: trying again in %.0fs", table_key, LOCK_POLL_SECONDS)
            time.sleep(LOCK_POLL_SECONDS)


def exit_code(verdicts: list[Verdict]) -> ExitCode:
    """Differences (or a table that failed) outrank a locked table (1 > 3 > 0): a difference
    found is the news."""
    if any(verdict.locked is None and not verdict.equal for verdict in verdicts):
        return ExitCode.ERROR
    if any(verdict.locked is not None for verdict in verdicts):
        return ExitCode.LOCKED
    return ExitCode.OK


def settled_keys(previous: Differences | None, found: Differences) -> set[Canonical]:
    """The differing keys whose rows on both sides are the same as at the previous look: the
    extraction between shipped whatever was in flight, so these differences are real."""
    if previous is None:
        return set()
    return {key for key, rows in found.evidence.items() if previous.evidence.get(key) == rows}


def _detail(record: OffloadedTable, sides: tuple[list[Canonical] | None, ...]) -> str:
    """What differs for one key, for the log: the columns whose values differ."""
    source_side, lake_side = sides
    if not source_side or not lake_side:
        return "missing in the lake" if source_side else "extra in the lake"
    if len(source_side) != 1 or len(lake_side) != 1:
        return f"{len(source_side)} source rows, {len(lake_side)} lake rows"
    names = [column.view_name for column in record.columns]
    return "; ".join(
        f"{name}: source {ours!r:.200}, lake {theirs!r:.200}"
        for name, ours, theirs in zip(names, source_side[0], lake_side[0], strict=True)
        if ours != theirs
    )
