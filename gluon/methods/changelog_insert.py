"""CHANGELOG_INSERT: CHANGELOG for insert-only tables; the delta view just appends."""

from __future__ import annotations

from gluon.methods.base import (
    CHANGELOG_OBJECTS,
    DML,
    ExtractionMethod,
    OffloadUseCase,
    SourceObject,
    ViewKind,
)


class ChangelogInsertMethod(ExtractionMethod):
    """Only inserts are captured; updates and deletes of the table are recorded by key and
    reported by extraction (never applied: the lake of an insert-only table only grows)."""

    name = "CHANGELOG_INSERT"
    summary = "insert-only, trigger on the table"
    captured_dml = frozenset({DML.INSERT})
    offload_use_cases = frozenset({OffloadUseCase.FULL_100_0, OffloadUseCase.FULL_100_10})
    view_kind = ViewKind.UNION_ALL
    source_objects = (*CHANGELOG_OBJECTS, SourceObject.CHANGELOG_TRIGGER)
    verifies_unique_key = True
    reports_uncaptured_dml = True
    when_to_use = (
        "The source table only ever receives inserts, so the delta view can append the "
        "changes instead of merging them."
    )
