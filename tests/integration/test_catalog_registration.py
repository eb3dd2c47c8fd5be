"""Registering a lake table is safe on a shared catalog (gluon.lake.tables.register_table).

A registration that already points where it should is left alone (no DROP, no CREATE:
a concurrent session reading it keeps working); a missing one is created; one pointing
at another location is re-pointed. Counted from the statements the session records
(``GLUON_RECORD_SQL``), on the real engine and real Delta tables.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from support.sql import read_statements

from gluon.config import load_settings
from gluon.lake import tables
from gluon.lake.session import LakeSession, open_session


def _delta_table(session: LakeSession, location: Path, values: list[int]) -> str:
    frame = session.spark.createDataFrame(pa.table({"id": pa.array(values, pa.int64())}))
    session.write(frame, str(location), mode="overwrite")
    return str(location)


def _statements_since(path: Path, already: int) -> list[str]:
    return [s["text"] for s in read_statements(path)[already:] if s["kind"] == "sql"]


def _changes(statements: list[str]) -> list[str]:
    return [s for s in statements if s.startswith(("DROP", "CREATE TABLE"))]


@pytest.mark.usefixtures("offload_home")
def test_a_correct_registration_is_kept_and_a_stale_one_re_pointed(
    tmp_path: Path, recorded_sql_path: Path
) -> None:
    with open_session(load_settings()) as session:
        old = _delta_table(session, tmp_path / "old", [1, 2])
        new = _delta_table(session, tmp_path / "new", [3])

        already = len(read_statements(recorded_sql_path))
        tables.register_table(session, "sh.sales_data", old)
        first = _statements_since(recorded_sql_path, already)
        assert _changes(first) == [
            f"CREATE TABLE IF NOT EXISTS `sh`.`sales_data` USING delta LOCATION '{old}'"
        ]

        already = len(read_statements(recorded_sql_path))
        tables.register_table(session, "sh.sales_data", old)
        assert _changes(_statements_since(recorded_sql_path, already)) == []
        assert tables.registered_location(session, "sh.sales_data") == old
        assert session.sql("SELECT count(*) FROM sh.sales_data").collect()[0][0] == 2

        already = len(read_statements(recorded_sql_path))
        tables.register_table(session, "sh.sales_data", new)
        assert _changes(_statements_since(recorded_sql_path, already)) == [
            "DROP TABLE IF EXISTS `sh`.`sales_data`",
            f"CREATE TABLE IF NOT EXISTS `sh`.`sales_data` USING delta LOCATION '{new}'",
        ]
        assert tables.registered_location(session, "sh.sales_data") == new
        assert session.sql("SELECT id FROM sh.sales_data").collect()[0][0] == 3


def test_locations_compare_as_the_catalog_writes_them() -> None:
    assert tables.same_location("file:/lake/sh.db/t", "/lake/sh.db/t")
    assert tables.same_location("file:///lake/sh.db/t/", "/lake/sh.db/t")
    assert tables.same_location("s3://bucket/lake/t/", "s3://bucket/lake/t")
    assert not tables.same_location("/lake/sh.db/t_data", "/lake/sh.db/t_data_c3")
    assert not tables.same_location("", "/lake/sh.db/t")
