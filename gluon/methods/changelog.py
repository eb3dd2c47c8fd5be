"""CHANGELOG: a trigger on the application table records every change in a changelog."""

from __future__ import annotations

from gluon.methods.base import (
    CHANGELOG_OBJECTS,
    DML,
    ExtractionMethod,
    OffloadUseCase,
    SourceObject,
)


class ChangelogMethod(ExtractionMethod):
    name = "CHANGELOG"
    is_basic = True
    summary = "trigger on the table"
    captured_dml = frozenset(DML)
    offload_use_cases = frozenset({OffloadUseCase.FULL_100_0, OffloadUseCase.FULL_100_10})
    source_objects = (*CHANGELOG_OBJECTS, SourceObject.CHANGELOG_TRIGGER)
    when_to_use = "The source table keeps receiving inserts, updates and deletes after the offload."
