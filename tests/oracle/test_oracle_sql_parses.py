"""Every SQL template Oracle uses renders, parses as Oracle SQL and matches its golden file.

The templates are ``templates/oracle/*.sql.j2`` plus the ``templates/default/``
ones Oracle falls back to. Each needs an entry in ``CASES`` (the test fails
otherwise, so a new template cannot go unchecked). Parsing uses sqlfluff's
``oracle`` dialect, on the text as rendered and as SQLAlchemy sends it (reserved
bind names such as ``:table`` become ``:"table"``).

Script templates (``SCRIPTS``: the capture objects' create/drop scripts) are
split on the dialect's separator line and each statement is parsed as it is;
they go to the driver without bind processing (``:NEW`` in a trigger body is
not a bind). Partials (``_*.sql.j2``) are checked through the templates that
import them.

Golden files: ``golden/<template>.sql`` hold the rendered text of every case. A mismatch
fails and says how to regenerate; ``GLUON_UPDATE_GOLDEN=1 pytest tests/oracle`` rewrites
the differing files and still fails, naming each, so a regeneration is always seen.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlfluff.core import Linter
from support.oracle_composite import RANGE_LIST, recorded_oracle

from gluon.capture import objects as capture_objects
from gluon.methods import registered_methods
from gluon.methods.base import SourceObject
from gluon.naming import TableRef
from gluon.offload.increments import IncrementRequest, plan_increment
from gluon.schema import Column, TableSpec
from gluon.source import connect
from gluon.source.oracle import OracleSource
from gluon.templates import templates_root

GOLDEN = Path(__file__).parent / "golden"
UPDATE_GOLDEN = os.environ.get("GLUON_UPDATE_GOLDEN") == "1"
SUFFIX = ".sql.j2"

SELECTED = ["ORDER_ID", '"lower_case"', "CAST(SYS_EXTRACT_UTC(ZONED_AT) AS TIMESTAMP(6))"]
URL = "oracle+oracledb://gluon:secret@localhost:1521/?service_name=FREEPDB1"

VERIFY_COLUMNS = [
    {"expr": "ORDER_ID", "kind": "decimal", "framed": False, "digits": (10, 0)},
    {"expr": "LINE_NO", "kind": "integer", "framed": False, "digits": (38, 0)},
    {"expr": "AMOUNT", "kind": "decimal", "framed": False, "digits": (12, 2)},
    {"expr": "NOTES", "kind": "text", "framed": True, "digits": (38, 0)},
    {"expr": "PAYLOAD", "kind": "binary", "framed": False, "digits": (38, 0)},
    {"expr": "ACTIVE", "kind": "boolean", "framed": False, "digits": (38, 0)},
    {"expr": "CREATED", "kind": "temporal", "framed": False, "digits": (38, 0)},
    {
        "expr": "CAST(SYS_EXTRACT_UTC(ZONED_AT) AS TIMESTAMP(6))",
        "kind": "other",
        "framed": True,
        "digits": (38, 0),
    },
]
VERIFY_HASHED: dict[str, Any] = {
    "schema": "APP",
    "table": "ORDERS",
    "columns": VERIFY_COLUMNS,
    "keys": VERIFY_COLUMNS[:2],
    "where": None,
    "residue_key": False,
    "mask": "255",
    "parent_mask": "15",
}
VERIFY_BY_RESIDUE: dict[str, Any] = {
    **VERIFY_HASHED,
    "keys": [VERIFY_COLUMNS[1]],  # one integer key: bucketed by its low hex digits
    "residue_key": True,
}

# -- capture objects: one case per method that creates the object ----------------------------

CAPTURED_TABLE = TableSpec(
    schema="APP",
    name="ORDERS",
    columns=(
        Column("ORDER_ID", "NUMBER(10)", "decimal(10,0)", nullable=False),
        Column("LINE_NO", "NUMBER(5)", "decimal(5,0)", nullable=False),
        Column("AMOUNT", "NUMBER(12,2)", "decimal(12,2)"),
        Column("ZONED_AT", "TIMESTAMP(6) WITH TIME ZONE", "timestamp"),
        Column("NOTES", "CLOB", "string"),
        Column("lower_case", "VARCHAR2(10)", "string"),
    ),
    primary_key=("ORDER_ID", "LINE_NO"),
)


def _capture_cases() -> dict[str, dict[str, dict[str, Any]]]:
    naming = connect(URL)
    cases: dict[str, dict[str, dict[str, Any]]] = {}
    for name, method in sorted(registered_methods().items()):
        if not method.supports_dialect("oracle"):
            continue
        objects = capture_objects.named_source_objects(naming, TableRef("APP", "ORDERS"), method)
        context = capture_objects.script_context(
            naming, CAPTURED_TABLE, method, objects, CAPTURED_TABLE.primary_key
        )
        for item in objects:
            for operation in ("create", "drop"):
                template = f"{operation}_{item.kind.value}"
                cases.setdefault(template, {})[name] = {**context, "object": item}
    schema = capture_objects.SourceObjectRef(SourceObject.HYBRID_SCHEMA, "APP_H", "APP_H", "SCHEMA")
    for operation in ("create", "drop"):
        cases[f"{operation}_hybrid_schema"] = {"hybrid schema": {"object": schema}}
    naming.engine.dispose()
    return cases


def _image_cases() -> dict[str, dict[str, Any]]:
    naming = connect(URL)
    method = registered_methods()["CHANGELOG"]
    objects = capture_objects.named_source_objects(naming, TableRef("APP", "ORDERS"), method)
    context = capture_objects.script_context(
        naming, CAPTURED_TABLE, method, objects, CAPTURED_TABLE.primary_key
    )
    naming.engine.dispose()
    partial = {**context, "where": '"ORDER_ID" < :p0'}  # a partially offloaded table
    return {"record_table_images": {"CHANGELOG": {**context, "where": ""}, "PARTIAL": partial}}


CHANGELOG = capture_objects.SourceObjectRef(
    SourceObject.CHANGELOG_TABLE, "APP_H", "ORDERS_LOG", "TABLE"
)
CAPTURE_CASES = {**_capture_cases(), **_image_cases()}
SCRIPTS = frozenset(CAPTURE_CASES) | {"alter_add_column", "alter_column_type"}


def _subpartition_where() -> str:
    """The WHERE clause reading two LIST subpartitions of a RANGE-LIST table (subpartition-based
    offload: each subpartition's partition bound and its own, binds for the values)."""
    source = recorded_oracle()
    request = IncrementRequest(subpartition_names=("P2017_02_EU", "P2017_02_NONE"))
    predicate = plan_increment(source, RANGE_LIST, request, []).predicate
    where, _ = predicate.to_source_sql(RANGE_LIST.columns, source.quote)
    source.engine.dispose()
    return where


# template -> case name -> render context. Templates that render an expression (not a
# statement) are listed in EXPRESSIONS and parsed inside "SELECT <expression> FROM ...".
CASES: dict[str, dict[str, dict[str, Any]]] = {
    "ping": {"ping": {}},
    "compatible": {"compatible": {}},
    "find_table": {"find_table": {}},
    "describe_columns": {"describe_columns": {}},
    # An ADD COLUMN under ORA_ROWSCN: whether rows unchanged since may read a default.
    "columns_with_defaults": {"columns_with_defaults": {}},
    # The report's schema drift check over many tables (OracleSource._describe_together).
    "describe_tables": {
        "two tables": {"tables": [TableRef("app", "orders"), TableRef("APP", "ITEMS")]},
    },
    "primary_key": {"primary_key": {}},
    "partitioning": {"partitioning": {}},
    # Subpartition-based offload: bounds from HIGH_VALUE (gluon.source.oracle_bounds).
    "list_partitions": {"list_partitions": {}},
    "list_subpartitions": {"list_subpartitions": {}},
    "current_scn": {"current_scn": {}},
    "enable_capture_trigger": {
        "disabled trigger": {
            "trigger": capture_objects.SourceObjectRef(
                SourceObject.CHANGELOG_TRIGGER, "APP_H", "ORDERS", "TRIGGER"
            ),
            "table": CAPTURED_TABLE,
        },
    },
    "read_rowscn_changes": {
        "rowscn": {"schema": "APP", "table": "ORDERS", "columns": SELECTED},
    },
    "unique_keys": {"unique_keys": {}},
    "count_duplicate_keys": {
        "two keys": {"schema": "APP", "table": "ORDERS", "keys": ["ORDER_ID", "LINE_NO"]},
    },
    "count_rows": {
        "plain names": {"schema": "APP", "table": "ORDERS"},
        "quoted names": {"schema": "app", "table": "Order Lines"},
    },
    "select_rows": {
        "whole table": {"schema": "APP", "table": "ORDERS", "columns": SELECTED},
        "filtered": {
            "schema": "APP",
            "table": "ORDERS",
            "columns": SELECTED,
            "where": "ORA_ROWSCN > :scn",
        },
        "subpartitions": {
            "schema": "APP",
            "table": "SALES_C",
            "columns": ["SALE_ID", "SOLD_ON", "REGION", "AMOUNT"],
            "where": _subpartition_where(),
        },
    },
    "extract_utc": {"zoned": {"column": "ZONED_AT"}},
    "exact_number": {
        "fixed point": {"column": "AMOUNT", "precision": 12, "scale": 2},
        "quoted name": {"column": "lower_case", "precision": 38, "scale": 0},
    },
    "object_exists": {"object_exists": {}},
    "object_marker": {"object_marker": {}},
    "object_columns": {"object_columns": {}},
    "capture_trigger_state": {"capture_trigger_state": {}},
    # The report's capture check over many tables (gluon.capture.existing).
    "capture_trigger_states": {
        "two tables": {
            "items": [
                capture_objects.SourceObjectRef(
                    SourceObject.CHANGELOG_TRIGGER, "APP_H", "ORDERS_CT", "TRIGGER"
                ),
                capture_objects.SourceObjectRef(
                    SourceObject.CHANGELOG_TRIGGER, "APP_H", "ITEMS_CT", "TRIGGER"
                ),
            ]
        }
    },
    "compile_errors": {"compile_errors": {}},
    # The enable preflight's dictionary queries (gluon.source.oracle_preflight).
    "session_user": {"session_user": {}},
    "session_privileges": {"session_privileges": {}},
    "session_schema_privileges": {"session_schema_privileges": {}},
    "hybrid_quota": {"hybrid_quota": {}},
    "count_schema_objects": {"count_schema_objects": {}},
    "count_changes": {"changelog": {"schema": "APP_H", "table": "ORDERS_LOG"}},
    "oldest_change": {"changelog": {"schema": "APP_H", "table": "ORDERS_LOG"}},
    "count_changes_of": {
        "changelogs": {
            "changelogs": [
                capture_objects.SourceObjectRef(
                    SourceObject.CHANGELOG_TABLE, "APP_H", "ORDERS_LOG", "TABLE"
                ),
                capture_objects.SourceObjectRef(
                    SourceObject.CHANGELOG_TABLE, "APP_H", "ITEMS_LOG", "TABLE"
                ),
            ]
        }
    },
    "oldest_changes_of": {
        "changelogs": {
            "changelogs": [
                capture_objects.SourceObjectRef(
                    SourceObject.CHANGELOG_TABLE, "APP_H", "ORDERS_LOG", "TABLE"
                ),
                capture_objects.SourceObjectRef(
                    SourceObject.CHANGELOG_TABLE, "APP_H", "ITEMS_LOG", "TABLE"
                ),
            ]
        }
    },
    "sequence_position": {"sequence": {"schema": "APP_H", "table": "ORDERS_SEQ"}},
    # Source schema changes carried to the capture objects (gluon.extract.schema_changes).
    # column_type: the changelog's wide type (gluon.extract.schema_changes._capture_column_type).
    "alter_add_column": {
        "changelog": {
            "object": CHANGELOG,
            "column": Column("NEW_COL", "VARCHAR2(20)", "string"),
            "column_type": "VARCHAR2(4000)",
        }
    },
    "alter_column_type": {
        "changelog": {
            "object": CHANGELOG,
            "column": Column("NOTE", "VARCHAR2(8000)", "string"),
            "column_type": "VARCHAR2(32767)",
        }
    },
    "max_string_size": {"max_string_size": {}},
    "read_changes": {
        "all rows": {"schema": "APP_H", "table": "ORDERS_LOG", "columns": SELECTED, "limit": None},
        "limited": {"schema": "APP_H", "table": "ORDERS_LOG", "columns": SELECTED, "limit": 500},
        "named changes": {
            "schema": "APP_H",
            "table": "ORDERS_LOG",
            "columns": SELECTED,
            "limit": None,
            "seqs": [12, 15],
        },
    },
    # Values the lake cannot take, found before enabling creates capture objects.
    "find_unfit_value": {
        "a date column": {
            "schema": "APP",
            "table": "ORDERS",
            "column": Column("SHIPPED_ON", "DATE", "timestamp_ntz"),
            "key_texts": ["TO_CHAR(ORDER_ID)", "TO_CHAR(LINE_NO)"],
        },
    },
    # A change the lake cannot take (gluon.extract.feeds.unfit): the next change of its key.
    "later_change_of_key": {
        "composite key": {
            "schema": "APP_H",
            "table": "ORDERS_LOG",
            "key_texts": ["TO_CHAR(ORDER_ID)", "TO_CHAR(LINE_NO)"],
        },
    },
    "delete_changes": {
        "one run": {"schema": "APP_H", "table": "ORDERS_LOG", "runs": [("low_0", "high_0")]},
        "three runs": {
            "schema": "APP_H",
            "table": "ORDERS_LOG",
            "runs": [(f"low_{index}", f"high_{index}") for index in range(3)],
        },
    },
    # gluon verify --repair (gluon.verify.repair): changes written into the changelog.
    "verify_capture_row": {
        "composite key": {
            "schema": "APP",
            "table": "ORDERS",
            "keys": ["ORDER_ID", "LINE_NO"],
            "names": ["ORDER_ID", "LINE_NO", "AMOUNT"],
            "log": {"schema": "APP_H", "name": "ORDERS_LOG"},
            "sequence": {"schema": "APP_H", "name": "ORDERS_SEQ"},
        },
    },
    "verify_capture_delete": {
        "composite key": {
            "keys": ["ORDER_ID", "LINE_NO"],
            "log": {"schema": "APP_H", "name": "ORDERS_LOG"},
            "sequence": {"schema": "APP_H", "name": "ORDERS_SEQ"},
        },
    },
    # gluon verify's checksums (gluon.verify.checksums): one column of each text kind.
    "verify_buckets": {
        "first level": {**VERIFY_HASHED, "digits": 2, "parent_digits": 0, "buckets": []},
        "within differing buckets": {
            **VERIFY_HASHED,
            "where": '"ORDER_ID" < :p0',
            "digits": 4,
            "parent_digits": 2,
            "buckets": ["0a", "ff"],
        },
        "integer key, all 16 digits within differing buckets": {
            **VERIFY_BY_RESIDUE,
            "digits": 16,
            "mask": "(-1)",
            "parent_digits": 13,
            "parent_mask": "4503599627370495",
            "buckets": [10, -3],
        },
    },
    "verify_key_filter": {
        "two buckets": {**VERIFY_HASHED, "digits": 3, "mask": "4095", "buckets": ["0a1", "ff0"]},
        "integer key": {**VERIFY_BY_RESIDUE, "digits": 3, "mask": "4095", "buckets": [10, 4095]},
    },
    "verify_touch_row": {"one key": {"schema": "APP", "table": "ORDERS", "keys": ["ORDER_ID"]}},
    "verify_delete_row": {"one key": {"schema": "APP", "table": "ORDERS", "keys": ["ORDER_ID"]}},
    # Staging lake rows for patching (gluon.patching).
    # Staging lake rows for patching (gluon.lifecycle.patching).
    "count_view_changes": {"changelog": {"schema": "APP_H", "table": "ORDERS_LOG"}},
    "clear_lake_rows": {"lake rows": {"schema": "APP_H", "table": "ORDERS_LK"}},
    "insert_lake_rows": {
        "lake rows": {
            "schema": "APP_H",
            "table": "ORDERS_LK",
            "names": [column.name for column in CAPTURED_TABLE.columns],
            "binds": [f"c{index}" for index in range(len(CAPTURED_TABLE.columns))],
        },
    },
    "unstage_matching_keys": {
        case: {
            "schema": "APP_H",
            "table": "ORDERS_LK",
            "columns": list(CAPTURED_TABLE.columns),
            "keys": keys,
            "other_schema": other[0],
            "other_table": other[1],
        }
        for case, keys, other in (
            ("application table", list(CAPTURED_TABLE.primary_key), ("APP", "ORDERS")),
            ("changelog, nullable key column", ["ORDER_ID", "AMOUNT"], ("APP_H", "ORDERS_LOG")),
        )
    },
    **CAPTURE_CASES,
    "cast_to_text": {
        "number": {"column": "ANY_NUMBER", "source_type": "NUMBER"},
        "negative scale": {"column": "HUGE", "source_type": "NUMBER(38,-5)"},
        "float": {"column": "APPROX", "source_type": "FLOAT(126)"},
        "timestamp": {"column": "NANOS_AT", "source_type": "TIMESTAMP(9)"},
        "zoned timestamp": {
            "column": "ZONED_NANOS_AT",
            "source_type": "TIMESTAMP(9) WITH TIME ZONE",
        },
        "local timestamp": {
            "column": "LOCAL_NANOS_AT",
            "source_type": "TIMESTAMP(9) WITH LOCAL TIME ZONE",
        },
        "rowid": {"column": "ROW_ADDRESS", "source_type": "ROWID"},
        "urowid": {"column": "LOGICAL_ADDRESS", "source_type": "UROWID"},
        "interval": {"column": "DURATION", "source_type": "INTERVAL DAY(2) TO SECOND(6)"},
        "no declared type": {"column": "lower_case"},
    },
}
EXPRESSIONS = frozenset({"cast_to_text", "exact_number", "extract_utc"})


def template_names() -> list[str]:
    """Templates Oracle renders: its own folder, then the default layer it falls back to."""
    root = templates_root()
    names = {
        path.name.removesuffix(SUFFIX)
        for folder in ("oracle", "default")
        for path in (root / folder).glob("*" + SUFFIX)
        if not path.name.startswith("_")
    }
    return sorted(names)


@pytest.fixture(scope="module")
def source() -> Iterator[OracleSource]:
    dialect = connect(URL)
    assert isinstance(dialect, OracleSource)
    yield dialect
    dialect.engine.dispose()


@pytest.fixture(scope="module")
def linter() -> Linter:
    return Linter(dialect="oracle")


def cases_of(template: str) -> dict[str, dict[str, Any]]:
    if template not in CASES:
        pytest.fail(
            f"template {template}{SUFFIX} has no render context: add a CASES entry in "
            f"{Path(__file__).name} (and run with GLUON_UPDATE_GOLDEN=1 to write its golden file)"
        )
    return CASES[template]


def as_statement(template: str, rendered: str) -> str:
    text = rendered.strip()
    return f"SELECT {text} FROM APP.ORDERS" if template in EXPRESSIONS else text


def parse_problems(linter: Linter, sql: str) -> list[str]:
    parsed = linter.parse_string(sql)
    problems = [violation.desc() for violation in parsed.violations]
    if parsed.tree is None:
        return [*problems, "no parse tree"]
    problems += [f"unparsable: {seg.raw!r}" for seg in parsed.tree.recursive_crawl("unparsable")]
    return problems


def bind_names(linter: Linter, sql: str) -> list[str]:
    tree = linter.parse_string(sql).tree
    assert tree is not None
    return [
        segment.raw.strip('"')
        for bind in tree.recursive_crawl("bind_variable")
        for segment in bind.recursive_crawl("parameter")
    ]


def golden_text(source: OracleSource, template: str) -> str:
    parts = [
        f"-- case: {case}\n{source.render(template, **context).strip()}\n"
        for case, context in cases_of(template).items()
    ]
    return "\n".join(parts)


def test_template_folder_is_found() -> None:
    assert "find_table" in template_names()
    assert "ping" in template_names()


def test_no_stale_cases_or_golden_files() -> None:
    names = set(template_names())
    assert set(CASES) - names == set(), "CASES has entries for templates that no longer exist"
    assert names >= EXPRESSIONS
    stale = {path.name for path in GOLDEN.glob("*.sql")} - {f"{name}.sql" for name in names}
    assert stale == set(), "golden files without a template"


@pytest.mark.parametrize("template", template_names())
def test_template_parses_as_oracle(source: OracleSource, linter: Linter, template: str) -> None:
    for case, context in cases_of(template).items():
        rendered = source.render(template, **context)
        if template in SCRIPTS:
            statements = source.split_script(rendered)
            assert statements, f"{template} ({case}) renders no statement"
            for statement in statements:
                assert parse_problems(linter, statement) == [], f"{template} ({case}):\n{statement}"
            continue
        statement = as_statement(template, rendered)
        assert parse_problems(linter, statement) == [], f"{template} ({case}) as rendered"
        # What oracledb receives: SQLAlchemy's text() with its bind-name quoting.
        compiled = str(sa.text(statement).compile(dialect=source.engine.dialect))
        assert parse_problems(linter, compiled) == [], f"{template} ({case}) as sent:\n{compiled}"
        expected = sorted(re.findall(r"(?<![:\w]):(\w+)", statement))
        assert sorted(bind_names(linter, compiled)) == expected, f"{template} ({case}) binds"


@pytest.mark.parametrize("template", template_names())
def test_template_matches_golden_file(source: OracleSource, template: str) -> None:
    path = GOLDEN / f"{template}.sql"
    text = golden_text(source, template)
    check_golden(path, text, what=template)


def check_golden(path: Path, text: str, *, what: str) -> None:
    """``text`` must be ``path``'s content. With GLUON_UPDATE_GOLDEN=1 a differing file is
    rewritten and the test still fails, naming it: regeneration is never silent."""
    old = path.read_text() if path.exists() else None
    if text == old:
        return
    if UPDATE_GOLDEN:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        pytest.fail(f"rewrote {path.name} ({what}): review it with git diff before committing")
    assert old is not None, f"{path.name} is missing: run with GLUON_UPDATE_GOLDEN=1"
    pytest.fail(
        f"{what} renders differently from {path.name}; if intended, rerun with "
        "GLUON_UPDATE_GOLDEN=1 and review the diff"
    )


def test_the_parser_does_reject_broken_sql(linter: Linter) -> None:
    assert parse_problems(linter, "SELECT FROM WHERE") != []


def test_a_key_changing_update_writes_its_delete_after_the_statement() -> None:
    """Issue 32 item 8: Oracle checks unique keys at statement end, so in UPDATE t SET id =
    id + 1 a delete of the old key written by the row trigger removes the row an earlier
    row moved into that key. The changelog trigger is a compound trigger: the row section
    writes no delete for a key change, AFTER STATEMENT writes one for each old key no row
    holds any more."""
    context = CASES["create_changelog_trigger"]["CHANGELOG"]
    rendered = connect(URL).render("create_changelog_trigger", **context)
    assert "COMPOUND TRIGGER" in rendered
    row_section, statement_section = rendered.split("AFTER STATEMENT IS", 1)
    updating = row_section.split("ELSIF UPDATING THEN", 1)[1].split("ELSIF DELETING THEN")[0]
    assert "'D', 'T'" not in updating, "the row section deletes the old key at once"
    assert "gl_moved.EXTEND" in updating
    assert "SELECT COUNT(*) INTO gl_held FROM APP.ORDERS" in statement_section
    assert "'D', 'T', gl_old.ORDER_ID, gl_old.LINE_NO" in statement_section


def test_the_changelog_trigger_writes_a_statement_s_changes_in_bulk() -> None:
    """Issue 33 item 3: the row section of the compound changelog trigger buffers each
    change; one FORALL writes the buffer every 1,000 changes and at AFTER STATEMENT, before
    the moved keys' deletes. CHANGELOG_INSERT (which records uncaptured events by key)
    writes each change at once, as before."""
    source = connect(URL)
    rendered = source.render(
        "create_changelog_trigger", **CASES["create_changelog_trigger"]["CHANGELOG"]
    )
    row_section = rendered.split("AFTER EACH ROW IS", 1)[1].split("END AFTER EACH ROW;")[0]
    statement_section = rendered.split("AFTER STATEMENT IS", 1)[1]
    assert "INSERT INTO" not in row_section
    assert "gl_kind(gl_count) := 'I';" in row_section
    assert "IF gl_count >= 1000 THEN" in row_section
    assert "FORALL gl_i IN 1 .. gl_count" in rendered
    assert statement_section.index("gl_flush;") < statement_section.index("FOR gl_i IN")
    insert_only = source.render(
        "create_changelog_trigger", **CASES["create_changelog_trigger"]["CHANGELOG_INSERT"]
    )
    assert "FORALL" not in insert_only
    assert "INSERT INTO" in insert_only.split("AFTER EACH ROW IS", 1)[1]
