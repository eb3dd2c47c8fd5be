"""The extraction-method registry holds the spec's six methods with the spec's facts.

The expected facts are written once, as data: ``TABLE_1`` is the spec's Table 1
(basic, captured DML, offload use cases) and ``TABLE_2`` its Table 2 (source
objects); the other columns are gluon's own declarations.
"""

from __future__ import annotations

import pytest

from gluon.errors import UnsupportedError, UsageError
from gluon.methods import get_method, registered_methods
from gluon.methods.base import (
    DML,
    ChangeReader,
    ExtractionMethod,
    OffloadUseCase,
    SourceObject,
    ViewKind,
)
from gluon.schema import Column, TableSpec
from gluon.source import DIALECT_MODULES, dialect_class
from gluon.templates import templates_root

# UPDATABLE_CHANGELOG's MERGE is "CHANGELOG only" in the spec: captured through the table.
TABLE_1 = """
method               basic  INSERT UPDATE DELETE MERGE  FULL_100_0 FULL_100_10 INCREMENTAL_90_10
ORA_ROWSCN           Y      Y      Y      N      N      Y          Y           N
CHANGELOG            Y      Y      Y      Y      Y      Y          Y           N
UPDATABLE            Y      Y      Y      Y      N      Y          Y           Y
UPDATABLE_CHANGELOG  N      Y      Y      Y      Y      Y          Y           N
CHANGELOG_INSERT     N      Y      N      N      N      Y          Y           N
UPDATABLE_INSERT     N      Y      N      N      N      Y          Y           Y
PG_LOGICAL           N      Y      Y      Y      Y      Y          Y           N
"""

CHANGELOG = {
    SourceObject.CHANGELOG_TABLE,
    SourceObject.CHANGELOG_SEQUENCE,
    SourceObject.CHANGELOG_TRIGGER,
}
# The lake-rows table is gluon's own: staged lake rows the updatable view also shows.
UPDATABLE = {
    SourceObject.CHANGELOG_TABLE,
    SourceObject.CHANGELOG_SEQUENCE,
    SourceObject.LAKE_ROWS_TABLE,
    SourceObject.UPDATABLE_VIEW,
    SourceObject.UPDATABLE_TRIGGER,
}
TABLE_2: dict[str, set[SourceObject]] = {
    "ORA_ROWSCN": set(),
    "CHANGELOG": CHANGELOG,
    "UPDATABLE": UPDATABLE,
    "UPDATABLE_CHANGELOG": CHANGELOG | UPDATABLE,
    "CHANGELOG_INSERT": CHANGELOG,
    "UPDATABLE_INSERT": UPDATABLE,
    "PG_LOGICAL": {SourceObject.REPLICATION_SLOT},
}

# method -> (view kind, verifies the key, dialects (None: all), change reader)
DECLARED: dict[str, tuple[ViewKind, bool, frozenset[str] | None, ChangeReader]] = {
    "ORA_ROWSCN": (ViewKind.MERGE, False, frozenset({"oracle"}), ChangeReader.ORA_ROWSCN),
    "CHANGELOG": (ViewKind.MERGE, False, None, ChangeReader.CHANGELOG),
    "UPDATABLE": (ViewKind.MERGE, False, None, ChangeReader.CHANGELOG),
    "UPDATABLE_CHANGELOG": (ViewKind.MERGE, False, None, ChangeReader.CHANGELOG),
    "CHANGELOG_INSERT": (ViewKind.UNION_ALL, True, None, ChangeReader.CHANGELOG),
    "UPDATABLE_INSERT": (ViewKind.UNION_ALL, True, None, ChangeReader.CHANGELOG),
    "PG_LOGICAL": (ViewKind.MERGE, False, frozenset({"postgresql"}), ChangeReader.PG_LOGICAL),
}


def _table_1() -> dict[str, dict[str, bool]]:
    header, *rows = TABLE_1.strip().splitlines()
    columns = header.split()[1:]
    return {
        row.split()[0]: dict(zip(columns, [flag == "Y" for flag in row.split()[1:]], strict=True))
        for row in rows
    }


EXPECTED = _table_1()
METHOD_NAMES = sorted(EXPECTED)


def _spec(**options: str) -> TableSpec:
    return TableSpec(
        schema="SH",
        name="PRODUCTS",
        columns=(Column("PROD_ID", "NUMBER(6)", "decimal(6,0)", nullable=False),),
        primary_key=("PROD_ID",),
        options=dict(options),
    )


def test_the_registry_holds_the_six_methods() -> None:
    assert sorted(registered_methods()) == METHOD_NAMES == sorted(TABLE_2) == sorted(DECLARED)


@pytest.mark.parametrize("name", METHOD_NAMES)
def test_names_follow_the_plugin_convention(name: str) -> None:
    method = registered_methods()[name]
    assert method.__module__ == f"gluon.methods.{name.lower()}"
    camel = "".join(part.capitalize() for part in name.split("_"))
    assert method.__name__ == f"{camel}Method"


@pytest.mark.parametrize("name", METHOD_NAMES)
def test_table_1(name: str) -> None:
    method = get_method(name)
    row = EXPECTED[name]
    assert method.is_basic is row["basic"]
    assert method.captured_dml == {dml for dml in DML if row[dml.value]}
    assert method.offload_use_cases == {use for use in OffloadUseCase if row[use.name]}
    assert method.when_to_use.strip()


def test_three_methods_are_basic() -> None:
    basic = {name for name, method in registered_methods().items() if method.is_basic}
    assert basic == {"ORA_ROWSCN", "CHANGELOG", "UPDATABLE"}


@pytest.mark.parametrize("name", METHOD_NAMES)
def test_table_2(name: str) -> None:
    method = get_method(name)
    assert set(method.source_objects) == TABLE_2[name]
    assert len(method.source_objects) == len(set(method.source_objects))
    assert all(method.has_object(kind) for kind in TABLE_2[name])
    assert SourceObject.HYBRID_SCHEMA not in method.source_objects


@pytest.mark.parametrize("name", METHOD_NAMES)
def test_declarations(name: str) -> None:
    method = get_method(name)
    view_kind, verifies, dialects, reader = DECLARED[name]
    assert method.view_kind is view_kind
    assert method.verifies_unique_key is verifies
    assert method.dialects == dialects
    assert method.change_reader is reader


@pytest.mark.parametrize("name", METHOD_NAMES)
@pytest.mark.parametrize("dialect", sorted(DIALECT_MODULES))
def test_every_object_has_templates_in_every_supported_dialect(name: str, dialect: str) -> None:
    method = get_method(name)
    if not method.supports_dialect(dialect):
        return
    implicit = dialect_class(dialect).implicit_source_objects
    root = templates_root()
    kinds = [kind for kind in method.source_objects if kind not in implicit]
    needed = [f"{operation}_{kind.value}" for kind in kinds for operation in ("create", "drop")]
    if kinds:
        needed += ["object_exists", "count_changes", "read_changes", "delete_changes"]
    missing = [
        template
        for template in needed
        if not any(
            (root / folder / f"{template}.sql.j2").is_file() for folder in (dialect, "default")
        )
    ]
    assert missing == []


@pytest.mark.parametrize("typed", ["changelog", "Changelog", "CHANGELOG"])
def test_get_method_ignores_case(typed: str) -> None:
    assert get_method(typed) is registered_methods()["CHANGELOG"]


@pytest.mark.parametrize(
    ("typed", "suggested"),
    [
        ("CHANGELOG_INSRT", "CHANGELOG_INSERT"),
        ("updateable", "UPDATABLE"),
        ("ORA_ROWSCAN", "ORA_ROWSCN"),
    ],
)
def test_get_method_suggests_the_closest_name(typed: str, suggested: str) -> None:
    with pytest.raises(UsageError, match=f"did you mean {suggested}\\?") as raised:
        get_method(typed)
    assert "\n" not in str(raised.value)
    assert raised.value.exit_code == 2


def test_get_method_lists_the_valid_names() -> None:
    with pytest.raises(UsageError) as raised:
        get_method("something else entirely")
    assert all(name in str(raised.value) for name in METHOD_NAMES)


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "oracle"])
def test_only_ora_rowscn_and_pg_logical_are_limited_to_one_dialect(dialect: str) -> None:
    supported = {name for name, m in registered_methods().items() if m.supports_dialect(dialect)}
    limited = {"oracle": "ORA_ROWSCN", "postgresql": "PG_LOGICAL"}
    expected = set(METHOD_NAMES) - {name for on, name in limited.items() if on != dialect}
    assert supported == expected


@pytest.mark.parametrize("dependencies", [None, "DISABLED", "enabled"])
def test_ora_rowscn_refuses_tables_without_rowdependencies(dependencies: str | None) -> None:
    spec = _spec() if dependencies is None else _spec(rowdependencies=dependencies)
    with pytest.raises(UnsupportedError, match="ROWDEPENDENCIES") as raised:
        get_method("ORA_ROWSCN").validate(spec)
    assert "\n" not in str(raised.value)


def test_ora_rowscn_accepts_a_table_with_rowdependencies() -> None:
    get_method("ORA_ROWSCN").validate(_spec(rowdependencies="ENABLED"))


@pytest.mark.parametrize("name", [name for name in METHOD_NAMES if name != "ORA_ROWSCN"])
def test_other_methods_accept_any_table(name: str) -> None:
    get_method(name).validate(_spec())


def test_methods_are_plain_declarations() -> None:
    for method in registered_methods().values():
        assert issubclass(method, ExtractionMethod)
        overridden = {
            key
            for key, value in vars(method).items()
            if callable(value) or isinstance(value, classmethod)
        }
        assert overridden <= {"validate"}, f"{method.name} overrides {overridden}"
