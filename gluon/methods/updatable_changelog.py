"""UPDATABLE_CHANGELOG: CHANGELOG and UPDATABLE together, sharing one changelog."""

from __future__ import annotations

from gluon.methods.base import (
    CHANGELOG_OBJECTS,
    DML,
    UPDATABLE_OBJECTS,
    ExtractionMethod,
    OffloadUseCase,
    SourceObject,
)


class UpdatableChangelogMethod(ExtractionMethod):
    """Rows record where they came from (``gl_origin``: T = table trigger, V = view trigger).

    MERGE is captured only through the application table (the view takes no MERGE).
    The two paths must never change the same rows: a change made to the table is
    already captured and must not be repeated on the view.
    """

    name = "UPDATABLE_CHANGELOG"
    summary = "a trigger on the table and the updatable view"
    captured_dml = frozenset(DML)
    offload_use_cases = frozenset({OffloadUseCase.FULL_100_0, OffloadUseCase.FULL_100_10})
    source_objects = (
        *CHANGELOG_OBJECTS,
        SourceObject.CHANGELOG_TRIGGER,
        *UPDATABLE_OBJECTS,
    )
    keeps_lake_only_rows = True
    when_to_use = (
        "Changes reach both data still in the source (captured by the table trigger) and "
        "data only in the lake (patched through the updatable view)."
    )
