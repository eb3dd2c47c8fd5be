"""Whether a table's changelog trigger captures at statement level: where the dialect does
(``SourceDialect.captures_by_statement``), the method records every event it fires on with
UPDATE among them, and the table takes transition tables (neither partitioned nor a
partition nor in an inheritance tree). The create script decides the same in the catalog;
status and the enable plan ask here to list the INSERT and DELETE statement triggers it
makes beside the UPDATE one (``gluon.capture.objects.created_names``)."""

from __future__ import annotations

from gluon.capture.objects import ROW_EVENTS
from gluon.methods.base import DML, ExtractionMethod
from gluon.source.base import SourceDialect


def method_captures_by_statement(method: type[ExtractionMethod]) -> bool:
    """The method's events allow statement triggers (the create script's ``statement_level``
    without the catalog check): UPDATE captured, no event recorded by key only."""
    uncaptured = [event for event in ROW_EVENTS if event in method.uncaptured_dml_reported()]
    return DML.UPDATE in method.captured_dml and not uncaptured


def captures_by_statement(
    source: SourceDialect, method: type[ExtractionMethod], schema: str, name: str
) -> bool:
    """Whether the changelog trigger of ``schema.name`` is (or will be) statement triggers.

    Raises:
        SourceError: the catalog cannot be read.
    """
    if not source.captures_by_statement or not method_captures_by_statement(method):
        return False
    rows = source.run_query("statement_capture_fits", {"schema": schema, "name": name})
    return bool(rows and rows[0][0])
