"""ORA_ROWSCN: Oracle's own per-row change numbers; nothing is created in the source."""

from __future__ import annotations

from gluon.errors import UnsupportedError
from gluon.methods.base import DML, ChangeReader, ExtractionMethod, OffloadUseCase
from gluon.schema import TableSpec


class OraRowscnMethod(ExtractionMethod):
    """Reads rows whose ``ORA_ROWSCN`` moved past the last extraction; deletes go unseen."""

    name = "ORA_ROWSCN"
    summary = "Oracle, no deletes"
    is_basic = True
    captured_dml = frozenset({DML.INSERT, DML.UPDATE})
    offload_use_cases = frozenset({OffloadUseCase.FULL_100_0, OffloadUseCase.FULL_100_10})
    source_objects = ()
    dialects = frozenset({"oracle"})
    change_reader = ChangeReader.ORA_ROWSCN
    sees_truncate = False
    when_to_use = (
        "The Oracle table only receives inserts and updates (a delete is never seen) "
        "and was created with ROWDEPENDENCIES."
    )

    @classmethod
    def validate(cls, spec: TableSpec) -> None:
        """Refuse a table without ROWDEPENDENCIES: its ORA_ROWSCN is per block, not per row."""
        if spec.options.get("rowdependencies") != "ENABLED":
            raise UnsupportedError(
                f"{cls.name} needs ROWDEPENDENCIES on {spec.schema}.{spec.name} (its ORA_ROWSCN "
                "is tracked per block); recreate the table with ROWDEPENDENCIES or use CHANGELOG"
            )
