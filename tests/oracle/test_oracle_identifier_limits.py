"""Issue 32 item 4: capture object names fit the connected Oracle server's limit, in bytes.

COMPATIBLE below 12.2 (common after upgrades) limits names to 30 bytes; from 12.2 on the
limit is 128 bytes. Oracle counts bytes of the database character set (AL32UTF8: a CJK
character is 3 bytes), so a 53-character CJK name (159 bytes) is too long even on 19c.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from gluon.capture import objects as capture_objects
from gluon.errors import UsageError
from gluon.methods import registered_methods
from gluon.naming import TableRef, name_size, shorten, source_object_names
from gluon.source import connect
from gluon.source.oracle import OracleSource

URL = "oracle+oracledb://gluon:secret@localhost:1521/?service_name=FREEPDB1"
TABLE_27 = "CUSTOMER_ORDER_LINE_HISTORY"  # 27 characters: its _LOG is 31
CJK = "顧客注文明細履歴" * 6 + "顧客注文明"  # 53 characters, 159 bytes in UTF-8


@pytest.fixture
def source() -> Iterator[OracleSource]:
    dialect = connect(URL)
    assert isinstance(dialect, OracleSource)
    yield dialect
    dialect.engine.dispose()


def _server(source: OracleSource, monkeypatch: pytest.MonkeyPatch, compatible: str) -> None:
    """The source as a server with ``compatible`` answers: no hybrid schema exists yet."""

    def run_query(template: str, params: Any = None, **_: Any) -> list[tuple[str]]:
        return [(compatible,)] if template == "compatible" else []

    monkeypatch.setattr(source, "run_query", run_query)


def _sizes(objects: list[capture_objects.SourceObjectRef]) -> dict[str, int]:
    sizes = {}
    for item in objects:
        sizes[f"{item.kind.value} schema"] = name_size(item.schema, in_bytes=True)
        sizes[f"{item.kind.value} name"] = name_size(item.name, in_bytes=True)
    return sizes


@pytest.mark.parametrize("method", ["CHANGELOG", "UPDATABLE_CHANGELOG"])
def test_a_27_character_table_fits_30_bytes_below_compatible_12_2(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    _server(source, monkeypatch, "11.2.0.4.0")
    objects = capture_objects.plan_source_objects(
        source, TableRef("APP", TABLE_27), registered_methods()[method]
    )
    assert source.identifier_length == 30
    too_long = {what: size for what, size in _sizes(objects).items() if size > 30}
    assert too_long == {}
    log = next(o for o in objects if o.kind.value == "changelog_table")
    assert log.name.startswith("CUSTOMER_ORDER_LINE_") and len(log.name) == 30


def test_the_same_table_keeps_its_plain_names_on_19c(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    _server(source, monkeypatch, "19.0.0")
    objects = capture_objects.plan_source_objects(
        source, TableRef("APP", TABLE_27), registered_methods()["CHANGELOG"]
    )
    assert f"{TABLE_27}_LOG" in {o.name for o in objects}


def test_a_cjk_table_name_fits_128_bytes_on_19c(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(CJK) == 53 and name_size(CJK, in_bytes=True) == 159
    _server(source, monkeypatch, "19.0.0")
    objects = capture_objects.plan_source_objects(
        source, TableRef("APP", CJK), registered_methods()["UPDATABLE_CHANGELOG"]
    )
    too_long = {what: size for what, size in _sizes(objects).items() if size > 128}
    assert too_long == {}
    assert all(re.search(r"_[0-9A-F]{8}$", o.name) for o in objects if o.schema != o.name)


def test_the_hybrid_schema_name_is_shortened_too() -> None:
    schema = "ACCOUNTING_LEDGER_ARCHIVE_2019"  # 30 characters: its _H is 32
    names = source_object_names(
        TableRef(schema, "T"), max_length=30, has_schemas=True, in_bytes=True
    )
    assert name_size(names.changelog_table.schema, in_bytes=True) <= 30
    assert names.changelog_table.schema == names.changelog_trigger.schema


def test_shorten_counts_bytes_and_is_stable() -> None:
    once = shorten(CJK + "_LOG", 30, in_bytes=True)
    assert name_size(once, in_bytes=True) <= 30
    assert once == shorten(CJK + "_LOG", 30, in_bytes=True)
    assert shorten(CJK + "_LOG", 30, in_bytes=True) != shorten(CJK + "_SEQ", 30, in_bytes=True)
    assert len(shorten(CJK, 30)) == 30  # in characters the same name is longer in bytes


def test_a_changelog_override_too_long_in_bytes_is_refused() -> None:
    with pytest.raises(UsageError, match="longer than the 30 bytes"):
        source_object_names(
            TableRef("APP", "T"),
            max_length=30,
            has_schemas=True,
            changelog_table="APP_H.ABCDEFGHIJKLMNOPQRSTUVWXYZ_LOG_1",
            in_bytes=True,
        )
