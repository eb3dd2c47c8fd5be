"""Subpartition-based offload against a live Oracle (skipped without GLUON_TEST_ORACLE_DSN).

Composite-partitioned tables (RANGE-LIST, RANGE-HASH) are made in the connecting user's
schema: gluon reads their bounds from the dictionary's HIGH_VALUE texts, and the rows its
predicate reads must be exactly the rows Oracle's own ``SUBPARTITION (name)`` extended
name holds (``PARTITION (name)`` for a HASH group).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from gluon.errors import UsageError
from gluon.naming import TableRef
from gluon.offload.increments import IncrementRequest, plan_increment
from gluon.source import connect
from gluon.source.oracle import OracleSource

DSN = os.environ.get("GLUON_TEST_ORACLE_DSN")

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.skipif(
        not DSN,
        reason="no Oracle database: set GLUON_TEST_ORACLE_DSN to an SQLAlchemy URL "
        "(oracle+oracledb://user:password@host:port/?service_name=...)",
    ),
]

RANGE_LIST = """
CREATE TABLE {table} (
    SALE_ID NUMBER(10) NOT NULL,
    SOLD_ON DATE NOT NULL,
    REGION VARCHAR2(8),
    AMOUNT NUMBER(12,2),
    CONSTRAINT {table}_PK PRIMARY KEY (SALE_ID)
)
PARTITION BY RANGE (SOLD_ON) SUBPARTITION BY LIST (REGION) (
    PARTITION P2017_01 VALUES LESS THAN (DATE '2017-02-01') (
        SUBPARTITION P2017_01_EMEA VALUES ('EMEA'),
        SUBPARTITION P2017_01_NONE VALUES (NULL, 'O''NEIL'),
        SUBPARTITION P2017_01_REST VALUES (DEFAULT)
    ),
    PARTITION P2017_02 VALUES LESS THAN (DATE '2017-03-01') (
        SUBPARTITION P2017_02_EMEA VALUES ('EMEA'),
        SUBPARTITION P2017_02_REST VALUES (DEFAULT)
    ),
    PARTITION PMAX VALUES LESS THAN (MAXVALUE) (
        SUBPARTITION PMAX_EMEA VALUES ('EMEA'),
        SUBPARTITION PMAX_REST VALUES (DEFAULT)
    )
)
"""

RANGE_HASH = """
CREATE TABLE {table} (
    SALE_ID NUMBER(10) NOT NULL,
    SOLD_ON DATE NOT NULL,
    REGION VARCHAR2(8),
    AMOUNT NUMBER(12,2),
    CONSTRAINT {table}_PK PRIMARY KEY (SALE_ID)
)
PARTITION BY RANGE (SOLD_ON) SUBPARTITION BY HASH (SALE_ID) SUBPARTITIONS 4 (
    PARTITION P2017_01 VALUES LESS THAN (DATE '2017-02-01'),
    PARTITION PMAX VALUES LESS THAN (MAXVALUE)
)
"""

FILL = """
INSERT INTO {table}
SELECT LEVEL, DATE '2017-01-01' + MOD(LEVEL, 80),
       DECODE(MOD(LEVEL, 4), 0, 'EMEA', 1, 'APAC', 2, NULL, 'O''NEIL'), LEVEL * 1.25
FROM DUAL CONNECT BY LEVEL <= 400
"""


@pytest.fixture
def source() -> Iterator[OracleSource]:
    assert DSN is not None
    dialect = connect(DSN)
    assert isinstance(dialect, OracleSource)
    yield dialect
    dialect.engine.dispose()


def _table(source: OracleSource, create: str) -> Iterator[str]:
    table = f"GLUON_S_{uuid.uuid4().hex[:8].upper()}"
    with source.engine.begin() as connection:
        connection.execute(sa.text(create.format(table=table)))
        connection.execute(sa.text(FILL.format(table=table)))
    try:
        yield table
    finally:
        with source.engine.begin() as connection:
            connection.execute(sa.text(f"DROP TABLE {table} CASCADE CONSTRAINTS PURGE"))


@pytest.fixture
def range_list(source: OracleSource) -> Iterator[str]:
    yield from _table(source, RANGE_LIST)


@pytest.fixture
def range_hash(source: OracleSource) -> Iterator[str]:
    yield from _table(source, RANGE_HASH)


def _ids(source: OracleSource, sql: str, params: dict[str, object] | None = None) -> list[int]:
    with source.engine.connect() as connection:
        return sorted(int(row[0]) for row in connection.execute(sa.text(sql), params or {}))


def _planned_ids(source: OracleSource, table: str, *names: str) -> list[int]:
    spec = source.describe_table(TableRef(_user(source), table))
    request = IncrementRequest(subpartition_names=names)
    predicate = plan_increment(source, spec, request, []).predicate
    where, params = predicate.to_source_sql(spec.columns, source.quote)
    return _ids(source, f"SELECT SALE_ID FROM {table} WHERE {where}", params)


def _user(source: OracleSource) -> str:
    with source.engine.connect() as connection:
        return str(connection.execute(sa.text("SELECT USER FROM DUAL")).scalar_one())


@pytest.mark.parametrize("name", ["P2017_01_EMEA", "P2017_01_NONE", "P2017_02_EMEA", "PMAX_EMEA"])
def test_a_list_subpartition_predicate_reads_exactly_its_rows(
    source: OracleSource, range_list: str, name: str
) -> None:
    expected = _ids(source, f"SELECT SALE_ID FROM {range_list} SUBPARTITION ({name})")
    assert expected, f"the fill put no rows in {name}"
    assert _planned_ids(source, range_list, name) == expected


def test_a_default_subpartition_goes_only_with_its_siblings(
    source: OracleSource, range_list: str
) -> None:
    with pytest.raises(UsageError, match="P2017_02_REST is a DEFAULT subpartition"):
        _planned_ids(source, range_list, "P2017_02_REST")
    expected = _ids(source, f"SELECT SALE_ID FROM {range_list} PARTITION (P2017_02)")
    assert _planned_ids(source, range_list, "P2017_02_REST", "P2017_02_EMEA") == expected


def test_hash_subpartitions_go_as_their_whole_partition(
    source: OracleSource, range_hash: str
) -> None:
    spec = source.describe_table(TableRef(_user(source), range_hash))
    found = source.subpartitions(spec)
    january = [name for name, item in found.items() if item.partition.name == "P2017_01"]
    assert len(january) == 4 and {item.kind for item in found.values()} == {"HASH"}
    with pytest.raises(UsageError, match="is a HASH subpartition"):
        _planned_ids(source, range_hash, january[0])
    expected = _ids(source, f"SELECT SALE_ID FROM {range_hash} PARTITION (P2017_01)")
    assert _planned_ids(source, range_hash, *january) == expected
