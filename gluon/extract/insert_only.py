"""Insert-only methods (CHANGELOG_INSERT, UPDATABLE_INSERT): never a key twice, nothing silent.

Their delta view appends every inserted row instead of merging by key, which
is cheap but trusts that a key is inserted once. Enabling requires a key
constraint in the source (``gluon.lifecycle``) and the updatable view's
trigger refuses a key it already shows, but two cases reach extraction:

- an insert whose key the lake already shows: a key only the lake holds (an
  UPDATABLE_INSERT patch of offloaded data that is not staged), or a key
  deleted from the source and inserted again. Appending it would show the key
  twice, so extraction keeps it out of the lake and records the whole row.
- an UPDATE or DELETE of the application table under CHANGELOG_INSERT: its
  trigger records the old key (``gluon.capture``). Applying it would need the
  merging view the method exists to avoid, so it is recorded and reported
  instead of being dropped silently.

A TRUNCATE (``gl_op`` 'T') is neither: the insert-only view applies it (the base and every
earlier insert disappear), so inserts after it never meet a key from before it.

Both are recorded in the repository (``gluon.repo.rejects``) before the batch
is committed to the lake, idempotently, so a crash at any step records each
change once. Status, the report and every later extraction show them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gluon.errors import StateError
from gluon.lake.changes import TRUNCATE, keys_in_lake
from gluon.lake.session import LakeSession
from gluon.methods import get_method, registered_methods
from gluon.methods.base import DML, ViewKind
from gluon.naming import lake_identifier
from gluon.repo import Repository
from gluon.repo.rejects import (
    DUPLICATE_KEY,
    UNCAPTURED_DELETE,
    UNCAPTURED_UPDATE,
    RejectedChange,
    RejectedChanges,
    RejectSummary,
)
from gluon.states import MergeMode

if TYPE_CHECKING:
    import pyarrow as pa

    from gluon.compact.options import CompactionMethod

UNCAPTURED_REASONS = {"U": UNCAPTURED_UPDATE, "D": UNCAPTURED_DELETE}
PASSED = ("I", TRUNCATE)
"""Changes an insert-only view applies: inserts, and a TRUNCATE (it empties the table)."""


def rejected_changes(repo: Repository) -> RejectedChanges:
    """The repository's records of rejected changes."""
    return RejectedChanges(repo.engine)


@dataclass(slots=True)
class Screen:
    """Keeps a batch of an insert-only table's changes from showing a key twice."""

    repo: Repository
    table_key: str
    method: str
    recorded: dict[str, int] = field(default_factory=dict)
    """Changes this run recorded as rejected, per reason."""

    def __call__(self, session: LakeSession, changes: pa.Table) -> pa.Table:
        """The inserts of ``changes`` the lake can take; record the rest.

        Idempotent (a lost commit race retries it): a change is recorded once.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        if changes.num_rows == 0:
            return changes
        record = self.repo.get_table(self.table_key)
        state = self.repo.incremental.get_state(self.table_key)
        if record is None or state is None or state.enabled_at is None:
            raise StateError(
                f"incremental update of {self.table_key} is no longer enabled: its repository "
                "records changed during this extraction"
            )
        # The changes carry the lake's column names: an unusual key name is escaped there.
        keys = [lake_identifier(name) for name in state.key_columns]
        ops = changes.column("gl_op")
        rejected = [
            RejectedChange(seq, UNCAPTURED_REASONS.get(op, UNCAPTURED_UPDATE), _key(row, keys))
            for row in changes.filter(pc.invert(pc.is_in(ops, pa.array(PASSED)))).to_pylist()
            for seq, op in [(int(row["gl_seq"]), str(row["gl_op"]))]
        ]
        passed = changes.filter(pc.is_in(ops, pa.array(PASSED)))
        inserts = passed.filter(pc.equal(passed.column("gl_op"), "I"))
        in_lake = keys_in_lake(
            session,
            record.columns,
            record.base_path,
            # IMMEDIATE: the staging table's batch is merged already (an extraction finishes a
            # staged batch first), and its inserts before a TRUNCATE are not in the lake.
            None if state.merge_mode == MergeMode.IMMEDIATE else state.delta_path,
            state.view_min_partition,
            keys,
            inserts,
            truncated=state.truncates_from(state.view_min_partition),
        )
        keep: list[bool] = []
        seen: set[tuple[Any, ...]] = set()
        rows = passed.to_pylist()
        last_truncate = max(
            (int(row["gl_seq"]) for row in rows if row["gl_op"] == TRUNCATE), default=None
        )
        for row in rows:
            if row["gl_op"] == TRUNCATE:
                keep.append(True)  # the view applies it: nothing to screen
                continue
            key = tuple(row[name] for name in keys)
            # A TRUNCATE later in the batch leaves none of this batch's earlier inserts, nor
            # the lake's rows: only inserts after the last one can meet a key already shown.
            after = last_truncate is None or int(row["gl_seq"]) > last_truncate
            duplicate = after and ((last_truncate is None and key in in_lake) or key in seen)
            if after:
                seen.add(key)
            keep.append(not duplicate)
            if duplicate:
                values = {name: value for name, value in row.items() if not name.startswith("gl_")}
                rejected.append(
                    RejectedChange(int(row["gl_seq"]), DUPLICATE_KEY, _key(row, keys), values)
                )
        for change in rejected_changes(self.repo).record(
            self.table_key, state.enabled_at, rejected
        ):
            self.recorded[change.reason] = self.recorded.get(change.reason, 0) + 1
        return passed.filter(pa.array(keep, pa.bool_()))

    def messages(self) -> list[str]:
        """What the table's recorded rejections (this run's and earlier ones) need from you."""
        summary = rejected_changes(self.repo).summary(self.table_key)
        lines = attention_messages(summary, self.method)
        if self.recorded:
            found = ", ".join(
                f"{count} {reason}" for reason, count in sorted(self.recorded.items())
            )
            lines.append(f"this extraction found {found} (recorded, not applied to the lake)")
        return lines


def _key(row: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    return {name: row[name] for name in keys}


def _listed(keys: list[dict[str, Any]], total: int) -> str:
    shown = "; ".join(", ".join(f"{name}={value}" for name, value in key.items()) for key in keys)
    more = f" and {total - len(keys)} more" if total > len(keys) else ""
    return f"{shown}{more}"


def _merging_counterpart(method: str) -> str:
    """The method that creates the same capture objects as ``method`` and captures every
    change into a merging view (CHANGELOG_INSERT's is CHANGELOG), or a description."""
    insert_only = get_method(method)
    for name, candidate in registered_methods().items():
        if (
            candidate.source_objects == insert_only.source_objects
            and candidate.captured_dml == frozenset(DML)
            and candidate.view_kind is ViewKind.MERGE
        ):
            return name
    return "a method"


def attention_messages(summary: RejectSummary, method: str) -> list[str]:
    """One line per kind of rejected change: what happened, which keys, what to do."""
    lines = []
    uncaptured = summary.counts.get(UNCAPTURED_UPDATE, 0) + summary.counts.get(UNCAPTURED_DELETE, 0)
    if uncaptured:
        keys = summary.sample_keys.get(UNCAPTURED_UPDATE, []) + summary.sample_keys.get(
            UNCAPTURED_DELETE, []
        )
        lines.append(
            f"{uncaptured} updates/deletes on the application table were not captured "
            f"({method}: {summary.counts.get(UNCAPTURED_UPDATE, 0)} updates, "
            f"{summary.counts.get(UNCAPTURED_DELETE, 0)} deletes; keys "
            f"{_listed(keys[:5], uncaptured)}): the lake no longer matches the source for "
            "them; re-offload with --reset-backend-table (after --incremental-updates-disabled), "
            f"or switch to {_merging_counterpart(method)}, which captures updates and deletes"
        )
    duplicates = summary.counts.get(DUPLICATE_KEY, 0)
    if duplicates:
        lines.append(
            f"{duplicates} inserts were kept out of the lake because it already shows their "
            f"key ({method} only adds rows; keys "
            f"{_listed(summary.sample_keys.get(DUPLICATE_KEY, []), duplicates)}): the rows are "
            "kept in gluon's repository (rejected_changes); re-offload with "
            "--reset-backend-table if the source holds the right rows"
        )
    return lines


IN_PLACE_WARNING = (
    "{method} with in-place compaction: queries of {view} show every row inserted since the "
    "last compaction twice until this compaction finishes (treat the table as offline; "
    "the default compaction of an insert-only table is full, which never shows duplicates)"
)
"""The spec's warning for an in-place compaction of an insert-only table."""


def status_notes(
    repo: Repository, table_key: str, method: str | None, in_place_run: int | None, view: str
) -> tuple[str, ...]:
    """What status and the report list as needing attention for an insert-only table.

    Args:
        repo: the repository.
        table_key: the table.
        method: its extraction method (None: incremental update is not enabled now).
        in_place_run: an unfinished in-place compaction run of the table, if any.
        view: the user view (for the in-place warning).
    """
    notes = []
    if in_place_run is not None and method is not None:
        notes.append(
            f"compaction run {in_place_run} is unfinished: "
            + IN_PLACE_WARNING.format(method=method, view=view)
        )
    summary = rejected_changes(repo).summary(table_key)
    notes += attention_messages(summary, method or "insert-only method")
    return tuple(notes)


def default_compaction_method(repo: Repository, table_key: str) -> CompactionMethod:
    """The compaction a command runs when it names no method.

    In place for merging views. For an insert-only table in place would show every
    row inserted since the last compaction twice until the run ends (the base
    already holds them while the view still appends them), so its default is
    full: the new base is built beside the old one and the views switch in one
    step. In place stays available with --incremental-in-place-compaction.
    """
    from gluon.compact.options import CompactionMethod

    state = repo.incremental.get_state(table_key)
    if state is not None and get_method(state.method).view_kind is ViewKind.UNION_ALL:
        return CompactionMethod.FULL
    return CompactionMethod.IN_PLACE
