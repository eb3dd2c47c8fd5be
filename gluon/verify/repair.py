"""``gluon verify --repair``: re-ship exactly the differing keys through the capture.

Nothing is written to the lake directly: each key becomes a change in the source's own
capture (its trigger or its WAL), which the next extraction ships like any other, so
exactly-once delivery and the lake's history still hold. A key the lake lacks or holds
with other values gets an update that changes nothing (the capture records the row as it
is); a key only the lake holds, a delete. A changelog method gets these rows written into
its changelog as its trigger writes them (the trigger skips an update that changes
nothing); log-based capture gets an update that changes nothing (the WAL carries it) and,
for a key only the lake holds, the lake's row inserted and deleted again in one
transaction (no other session ever sees it). A key the lake shows twice gets, with a
changelog, a delete shipped by an extraction of its own before its row (a merge would
update both copies).
"""

from __future__ import annotations

from typing import Any

from gluon import source as sources
from gluon.config import Settings
from gluon.errors import UsageError
from gluon.extract.run import run_extraction
from gluon.methods import get_method
from gluon.methods.base import DML, SourceObject, ViewKind
from gluon.naming import TableRef
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import ENABLED
from gluon.verify.canonical import Canonical
from gluon.verify.run import Verdict


def check_repairable(repo: Repository, record: OffloadedTable) -> tuple[str, ...]:
    """The key columns the repair matches rows by.

    Raises:
        UsageError: the table's capture cannot carry a repair.
    """
    state = repo.incremental.get_state(record.table_key)
    if state is None or state.status != ENABLED:
        raise UsageError(
            f"--repair re-ships keys through incremental update, which is not enabled for "
            f"{record.table_key}: offload the table again to rebuild the lake"
        )
    method = get_method(state.method)
    # Every DML of the table itself reaches the capture (not through an updatable view,
    # whose lake-only rows are the method's own doing).
    captures_dml = method.captured_dml == frozenset(DML) and not method.has_object(
        SourceObject.UPDATABLE_VIEW
    )
    if method.view_kind is ViewKind.UNION_ALL or not captures_dml:
        raise UsageError(
            f"--repair needs a method that captures inserts, updates and deletes of the table "
            f"itself; {record.table_key} uses {state.method}: offload the table again to "
            "rebuild the lake"
        )
    return state.key_columns


def repair(settings: Settings, repo: Repository, record: OffloadedTable, verdict: Verdict) -> int:
    """Write one captured change per differing key, in one transaction; return how many
    keys were re-shipped (the caller extracts and verifies again)."""
    keys = check_repairable(repo, record)
    state = repo.incremental.get_state(record.table_key)
    assert state is not None  # check_repairable refused a table without
    source = sources.connect_configured(settings)
    objects = {item.kind: item for item in state.source_objects}
    names = [column.name for column in record.columns]
    context: dict[str, Any] = {
        "schema": record.source_schema,
        "table": record.source_table,
        "keys": list(keys),
        "names": names,
        "log": objects.get(SourceObject.CHANGELOG_TABLE.value),
        "sequence": objects.get(SourceObject.CHANGELOG_SEQUENCE.value),
    }
    found = verdict.differences
    present = [*found.missing_in_lake, *found.different_values]
    statements: list[tuple[str, dict[str, Any]]] = []
    if context["log"] is not None:
        # A trigger records only real changes: write what it would have written.
        row = source.render("verify_capture_row", **context)
        gone = source.render("verify_capture_delete", **context)
        doubled = [key for key in found.different_values if _shown_twice(found.evidence[key])]
        if doubled:
            # A merge updates every row of a key the lake holds twice (IMMEDIATE): a
            # delete shipped alone first leaves none, then the row is shipped once.
            deletes = [(gone, source.adapt_params(_key_params(key))) for key in doubled]
            source.execute_in_transaction(
                deletes, what=f"re-shipping keys of {record.table_key} shown twice"
            )
            run_extraction(settings, TableRef.parse(record.table_key))
        statements += [(row, _key_params(key)) for key in present]
        statements += [(gone, _key_params(key)) for key in found.extra_in_lake]
    else:
        touch = source.render("verify_touch_row", **context)
        delete = source.render("verify_delete_row", **context)
        binds = [f"c{index}" for index in range(len(names))]
        insert = source.render("insert_lake_rows", **context, binds=binds)
        statements += [(touch, _key_params(key)) for key in present]
        for key in found.extra_in_lake:
            for lake_row in (found.evidence[key][1] or [])[:1]:
                statements.append((insert, dict(zip(binds, lake_row, strict=True))))
                statements.append((delete, _key_params(key)))
    if statements:
        statements = [(sql, source.adapt_params(params)) for sql, params in statements]
        source.execute_in_transaction(statements, what=f"re-shipping keys of {record.table_key}")
    return found.count


def _shown_twice(sides: tuple[list[Canonical] | None, list[Canonical] | None]) -> bool:
    return len(sides[1] or []) > 1


def _key_params(key: Canonical) -> dict[str, Any]:
    return {f"k{index}": value for index, value in enumerate(key)}
