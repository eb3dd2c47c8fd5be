"""PG_LOGICAL's pure parts: test_decoding rows parsed, gl_seq numbering, the enable checks."""

from __future__ import annotations

import datetime as dt
import re
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gluon.errors import SourceError, StateError, UnsupportedError
from gluon.extract.feeds.logical_positions import (
    POSITION_BITS,
    format_lsn,
    logical_sequence,
    parse_lsn,
)
from gluon.extract.feeds.slot import check_logical_decoding
from gluon.extract.feeds.slot_decoding import peek_slot
from gluon.schema import Column, TableSpec
from gluon.source import logical
from gluon.source.logical import (
    UNCHANGED_TOAST,
    DecodedChange,
    DecodingError,
    commit_time,
    parse_change,
    split_label,
)


def test_an_insert_keeps_every_value_as_text() -> None:
    change = parse_change(
        "table public.t: INSERT: id[integer]:1 name[text]:'it''s a b' a[integer[]]:'{1,2}' "
        "ts[timestamp with time zone]:'2026-11-23 03:48:15.7+00' n[numeric]:null"
    )
    assert change is not None
    assert (change.table, change.op, change.old) == ("public.t", "INSERT", None)
    assert change.new == {
        "id": "1",
        "name": "it's a b",
        "a": "{1,2}",
        "ts": "2026-11-23 03:48:15.7+00",
        "n": None,
    }


def test_a_key_change_carries_the_old_key() -> None:
    change = parse_change(
        "table public.t: UPDATE: old-key: id[integer]:2 new-tuple: id[integer]:3 b[text]:null"
    )
    assert change is not None
    assert (change.old, change.new) == ({"id": "2"}, {"id": "3", "b": None})


def test_quoted_names_and_an_unchanged_large_value() -> None:
    change = parse_change(
        'table "My""S"."T x": UPDATE: "Id"[integer]:1 big[text]:unchanged-toast-datum '
        "s[text]:'unchanged-toast-datum'"
    )
    assert change is not None
    assert change.table == '"My""S"."T x"'
    assert split_label(change.table) == ('My"S', "T x")
    assert change.new == {"Id": "1", "big": UNCHANGED_TOAST, "s": "unchanged-toast-datum"}


def test_begin_and_commit_rows_are_no_changes() -> None:
    assert parse_change("BEGIN 726") is None
    assert parse_change("COMMIT 726") is None


def test_a_delete_without_replica_identity_is_refused() -> None:
    with pytest.raises(DecodingError, match="REPLICA IDENTITY FULL"):
        parse_change("table public.t: DELETE: (no-tuple-data)")


def test_sequences_follow_commit_order_then_position() -> None:
    assert parse_lsn("0/19246B8") == 0x19246B8
    assert format_lsn(parse_lsn("1A/FF0")) == "1A/FF0"
    first = [logical_sequence(0x100, position) for position in range(3)]
    later = logical_sequence(0x101, 0)
    assert first == sorted(first) and first[-1] < later
    with pytest.raises(StateError, match="more than"):
        logical_sequence(0x100, 1 << POSITION_BITS)


class _Source:
    engine = SimpleNamespace(url=SimpleNamespace(database="db"))

    def __init__(self, row: tuple[Any, ...]) -> None:
        wal_level, self.identity, self.has_primary_key, *server = row
        self.server = (wal_level, *(server or FREE_SLOT_AND_PRIVILEGE))

    def run_query(self, template: str, params: dict[str, Any] | None = None) -> list[Any]:
        if template == "logical_relations":  # the table, not partitioned
            key = ["id"] if self.has_primary_key else []
            return [("app", "items", "app.items", True, self.identity, key, False)]
        if template == "logical_columns":
            return [("id", "id")]
        assert template == "logical_decoding_setup"
        return [self.server]


FREE_SLOT_AND_PRIVILEGE = (10, 9, True, "gluon")
"""max_replication_slots, slots in use (the table's own left out), REPLICATION, the user."""

SPEC = TableSpec("app", "items", (Column("id", "integer", "bigint", False),), primary_key=("id",))


@pytest.mark.parametrize(
    ("row", "keys", "message"),
    [
        (("replica", "d", True), ("id",), "wal_level=logical"),
        (("logical", "d", False), ("id",), "REPLICA IDENTITY FULL"),
        (("logical", "n", True), ("id",), "REPLICA IDENTITY FULL"),
        (("logical", "d", True), ("name",), "REPLICA IDENTITY FULL"),
        (("logical", "d", True, 10, 10, True, "gluon"), ("id",), "free replication slot"),
        (("logical", "d", True, 10, 0, False, "app"), ("id",), "ALTER ROLE app REPLICATION"),
    ],
)
def test_enable_checks_say_what_is_missing_and_how_to_fix_it(
    row: tuple[Any, ...], keys: tuple[str, ...], message: str
) -> None:
    with pytest.raises(UnsupportedError, match=message) as raised:
        check_logical_decoding(_Source(row), SPEC, keys, "PG_LOGICAL")  # type: ignore[arg-type]
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("row", [("logical", "d", True), ("logical", "f", False)])
def test_a_primary_key_or_full_identity_is_enough(row: tuple[Any, ...]) -> None:
    check_logical_decoding(_Source(row), SPEC, ("id",), "PG_LOGICAL")  # type: ignore[arg-type]


def test_a_commit_row_gives_its_time_in_utc() -> None:
    assert commit_time("COMMIT 771 (at 2026-11-23 10:38:09.5+05:30)") == dt.datetime(
        2026, 11, 23, 5, 8, 9, 500000
    )
    assert commit_time("COMMIT 771 (at 2026-11-23 05:08:09-03)") == dt.datetime(
        2026, 11, 23, 8, 8, 9
    )
    assert commit_time("COMMIT 771") is None  # peeked without include-timestamp
    assert commit_time("BEGIN 771") is None


class _BusySlot:
    """A slot another process reads for the first ``busy`` peeks."""

    def __init__(self, busy: int) -> None:
        self.busy = busy
        self.peeks = 0

    def run_query(self, template: str, params: dict[str, Any] | None = None) -> list[Any]:
        assert template == "peek_slot_changes"
        self.peeks += 1
        if self.peeks <= self.busy:
            raise SourceError(
                'postgresql query peek_slot_changes failed: replication slot "s" is active '
                "for PID 4242"
            )
        return [("0/10", "7", "BEGIN 7")]


def test_a_read_waits_while_another_process_peeks_at_the_slot() -> None:
    source = _BusySlot(busy=2)
    assert peek_slot(source, "s", 10) == [("0/10", "7", "BEGIN 7")]  # type: ignore[arg-type]
    assert source.peeks == 3
    with pytest.raises(SourceError, match="is active for PID"):
        peek_slot(_BusySlot(busy=100), "s", 10, wait_seconds=0.3)  # type: ignore[arg-type]


TRICKY_ROWS = [
    "table public.t: INSERT: id[integer]:1 name[text]:'it''s a b' a[integer[]]:'{1,2}' "
    "ts[timestamp with time zone]:'2026-11-23 03:48:15.7+00' n[numeric]:null",
    "table public.t: UPDATE: old-key: id[integer]:2 new-tuple: id[integer]:3 b[text]:null",
    'table "My""S"."T x": UPDATE: "Id"[integer]:1 big[text]:unchanged-toast-datum '
    "s[text]:'unchanged-toast-datum'",
    "table public.t: INSERT: s[text]:' new-tuple: x[int]:1' e[text]:'' q[text]:''''",
    "table public.t: UPDATE: old-key: s[text]:'a '' new-tuple: b' new-tuple: s[text]:'null'",
    'table public.t: INSERT: "a b[c]"[character varying(3)[]]:\'{"x y"}\' "new-tuple:"[int]:4',
    "table public.t: INSERT: id[integer]:1 odd[text]:it's",  # a bare value with a quote
    'table public.t: INSERT: v["My[T]"]:1',  # a quoted type holding brackets
    "table public.t: DELETE: id[integer]:7",
    "table public.t: INSERT:",
    'table pu"b.t: INSERT: id[integer]:5',  # a bare name with a double quote
    "table public.t: DELETE: (no-tuple-data) id[integer]:1",
]


@pytest.mark.parametrize("data", TRICKY_ROWS)
def test_the_fast_reader_agrees_with_the_careful_one(
    data: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _parsed_or_refused(data)
    monkeypatch.setattr(logical, "_read_tuples_fast", lambda data, position: None)
    assert fast == _parsed_or_refused(data)


@pytest.mark.parametrize("data", TRICKY_ROWS)
def test_the_plain_reader_agrees_with_the_careful_one_or_leaves_the_row_to_it(
    data: str,
) -> None:
    careful = _parsed_or_refused(data)
    if not isinstance(careful, DecodedChange):
        table = data[len("table ") :].split(": ", 1)[0]
        assert logical.plain_values(data, logical.plain_row_pattern([table], ["id"])) is None
        return
    names = [*careful.new, "not_logged"]
    plain = logical.plain_values(
        data, logical.plain_row_pattern([careful.table], [_printed(name) for name in names])
    )
    if careful.old is not None or logical.UNCHANGED_TOAST in careful.new.values():
        assert plain is None
    elif plain is not None:
        assert plain == (careful.op, [careful.new.get(name) for name in names])


def test_the_plain_reader_reads_a_bench_row_and_a_key_only_delete() -> None:
    names = ["id", "amount", "label", "at"]
    pattern = logical.plain_row_pattern(["bench.items"], names)
    row = (
        "table bench.items: UPDATE: id[bigint]:1 amount[numeric]:1.37 label[text]:'it''s 1' "
        "at[timestamp without time zone]:'2024-01-01 00:00:01'"
    )
    assert logical.plain_values(row, pattern) == (
        "UPDATE",
        ["1", "1.37", "it's 1", "2024-01-01 00:00:01"],
    )
    delete = "table bench.items: DELETE: id[bigint]:7"
    assert logical.plain_values(delete, pattern) == ("DELETE", ["7", None, None, None])
    other = "table bench.items_x: DELETE: id[bigint]:7"
    assert logical.plain_values(other, pattern) is None


def _parsed_or_refused(data: str) -> DecodedChange | str | None:
    try:
        return parse_change(data)
    except DecodingError as exc:
        return str(exc)


def _printed(name: str) -> str:
    """``name`` as the rows of these tests print it: quoted unless plain lower case."""
    return name if re.fullmatch(r"[a-z_][a-z0-9_$]*", name) else _quoted(name)


def _quoted(name: str) -> str:
    """``name`` double-quoted (the server quotes some names, any name may be quoted)."""
    return '"' + name.replace('"', '""') + '"'


@given(
    rows=st.lists(
        st.tuples(
            st.text(alphabet="ab \"[]:.'_-", min_size=1, max_size=6),
            st.sampled_from(["integer", "text", "integer[]", "character varying(3)[]"]),
            st.one_of(st.none(), st.text(alphabet="ab '\"[]:-_", max_size=8)),
        ),
        max_size=4,
        unique_by=lambda row: row[0],
    ),
    old=st.booleans(),
)
def test_random_rows_read_back_as_written(
    rows: list[tuple[str, str, str | None]], old: bool
) -> None:
    items = "".join(
        f" {_quoted(name)}[{type_}]:"
        + ("null" if value is None else "'" + value.replace("'", "''") + "'")
        for name, type_, value in rows
    )
    values = {name: value for name, _, value in rows}
    data = (
        f"table public.t: UPDATE: old-key:{items} new-tuple:{items}"
        if old
        else (f"table public.t: UPDATE:{items}")
    )
    change = parse_change(data)
    assert change is not None
    assert change.new == values
    assert change.old == (values if old else None)
    names = [name for name, _, _ in rows]
    pattern = logical.plain_row_pattern(["public.t"], [_quoted(name) for name in names])
    plain = logical.plain_values(data, pattern)
    assert plain == (None if old else ("UPDATE", [values[name] for name in names]))


@pytest.mark.parametrize(
    ("data", "tables"),
    [
        ("table public.t: TRUNCATE: (no-flags)", ("public.t",)),
        ("table public.t: TRUNCATE: restart_seqs", ("public.t",)),
        ("table public.t: TRUNCATE: restart_seqs cascade", ("public.t",)),
        (
            'table public.lp, "select"."a, b: c", public.lp_eu: TRUNCATE: cascade',
            ("public.lp", '"select"."a, b: c"', "public.lp_eu"),
        ),
    ],
)
def test_a_truncate_names_every_table_it_empties(data: str, tables: tuple[str, ...]) -> None:
    change = parse_change(data)
    assert change is not None
    assert (change.op, change.table, change.truncated) == ("TRUNCATE", tables[0], tables)
    assert change.new == {} and change.old is None
    assert logical.read_header(data)[:2] == (tables, "TRUNCATE")


def test_a_truncate_with_unknown_flags_is_refused() -> None:
    with pytest.raises(DecodingError, match="TRUNCATE flags"):
        parse_change("table public.t: TRUNCATE: everything")


def _relation(name: str, *, leaf: bool = True) -> logical.LogicalRelation:
    return logical.LogicalRelation("app", name, f"app.{name}", leaf, "d", ("id",))


PARTITIONED = logical.RelationLabels(
    _relation("t", leaf=False),
    (_relation("t", leaf=False), _relation("t_a"), _relation("t_b")),
    {"id": "id"},
)


@pytest.mark.parametrize(
    ("truncated", "empties"),
    [
        (["app.t", "app.t_a", "app.t_b"], True),  # TRUNCATE app.t names the root and leaves
        (["app.t_a", "app.t_b"], True),  # every leaf
        (["app.t_a"], False),  # one partition of two
        (["app.t_a", "app.other"], False),
        (["app.other"], None),
        (['app."T"'], None),
    ],
)
def test_a_truncate_empties_the_table_when_it_names_the_root_or_every_leaf(
    truncated: list[str], empties: bool | None
) -> None:
    assert PARTITIONED.empties_table(truncated) is empties


def test_a_label_names_the_table_however_it_is_quoted() -> None:
    assert PARTITIONED.labels == {"app.t_a", "app.t_b"}
    assert PARTITIONED.names_ours('"app"."t_a"') and PARTITIONED.names_ours("app.t")
    assert not PARTITIONED.names_ours('app."T_a"') and not PARTITIONED.names_ours("app.t_c")
    assert split_label('"we.ird"."a""b"') == ("we.ird", 'a"b')
    with pytest.raises(DecodingError):
        split_label("a.b.c")


@given(
    names=st.lists(
        st.tuples(
            st.text(alphabet='ab ".:,_', min_size=1, max_size=5),
            st.text(alphabet='ab ".:,_', min_size=1, max_size=5),
        ),
        min_size=1,
        max_size=4,
    ),
    flags=st.sampled_from(["(no-flags)", "restart_seqs", "cascade", "restart_seqs cascade"]),
)
def test_random_truncate_rows_name_their_tables_back(
    names: list[tuple[str, str]], flags: str
) -> None:
    labels = [f"{_quoted(schema)}.{_quoted(table)}" for schema, table in names]
    data = f"table {', '.join(labels)}: TRUNCATE: {flags}"
    change = parse_change(data)
    assert change is not None and change.truncated == tuple(labels)
    assert [split_label(label) for label in change.truncated] == names
