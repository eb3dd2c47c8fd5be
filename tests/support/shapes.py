"""Table shapes for the differential matrix (tests/integration/test_shapes_*.py).

A :class:`Shape` is one source table: its columns (with the *kind* that says how a value
is compared), its key, how rows are made (SQL literals per row number), and the rounds
of DML a case runs after enabling. :func:`cases` draws, for a group of shapes, which
extraction method and merge mode each shape runs with: every shape meets every method
that applies to it, and the merge modes alternate along a seeded order so each shape and
each method meet both modes across the matrix. The draw is fixed: every run is the same.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

__all__ = [
    "INSERT_ONLY",
    "METHODS",
    "MODES",
    "Col",
    "Round",
    "Shape",
    "cases",
    "member_cases",
    "quote",
]

METHODS: dict[str, tuple[str, ...]] = {
    "sqlite": ("CHANGELOG", "UPDATABLE_CHANGELOG", "CHANGELOG_INSERT", "UPDATABLE_INSERT"),
    "postgresql": (
        "CHANGELOG",
        "UPDATABLE_CHANGELOG",
        "CHANGELOG_INSERT",
        "UPDATABLE_INSERT",
        "PG_LOGICAL",
    ),
}
MODES = ("DEFERRED", "IMMEDIATE")
INSERT_ONLY = frozenset({"CHANGELOG_INSERT", "UPDATABLE_INSERT"})
DRAW_SEED = 20261126


def quote(name: str) -> str:
    """A SQL identifier in double quotes (both dialects)."""
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Col:
    """One column: its source name, declared type and comparison kind (``compare.KINDS``).

    ``generated``: a generated column (never written by DML, still offloaded)."""

    name: str
    declared: str
    kind: str
    generated: bool = False


Statements = list[str]
"""One transaction's statements."""


@dataclass(frozen=True)
class Round:
    """DML run before one extraction: transactions, each a list of statements.

    ``inserts_only``: the round only inserts (insert-only methods run only these)."""

    name: str
    transactions: Callable[[Shape], list[Statements]]
    inserts_only: bool = False


@dataclass(frozen=True)
class Shape:
    """One source table and the DML a case runs on it.

    ``key_of(n)`` and ``values_of(n)`` give row ``n``'s key and other written columns as
    SQL literals, in column order (generated columns excluded). ``note`` names a text
    column multi-row updates set. ``setup`` runs before the table is created
    (schemas, types), ``after_create`` after it (partitions).
    """

    id: str
    dialect: str
    schema: str
    table: str
    columns: tuple[Col, ...]
    key: tuple[str, ...]
    key_of: Callable[[int], tuple[str, ...]]
    values_of: Callable[[int], tuple[str, ...]]
    note: str
    rows: int = 10
    key_options: str = ""
    """After ``PRIMARY KEY (...)``, e.g. ``DEFERRABLE INITIALLY DEFERRED``."""
    table_suffix: str = ""
    setup: tuple[str, ...] = ()
    after_create: tuple[str, ...] = ()
    enable_flags: tuple[str, ...] = ()
    rounds: tuple[Round, ...] = ()
    methods: tuple[str, ...] | None = None
    """The methods that apply (None: every method of the dialect)."""

    @property
    def qualified(self) -> str:
        return f"{quote(self.schema)}.{quote(self.table)}"

    @property
    def typed(self) -> str:
        """What a user types after ``-t``."""
        return f"{quote(self.schema)}.{quote(self.table)}"

    @property
    def written(self) -> tuple[Col, ...]:
        return tuple(column for column in self.columns if not column.generated)

    @property
    def others(self) -> tuple[Col, ...]:
        """The written columns outside the key, in order."""
        return tuple(column for column in self.written if column.name not in self.key)

    def create(self) -> list[str]:
        """CREATE TABLE (and what goes with it) plus the first rows."""
        columns = ", ".join(f"{quote(c.name)} {c.declared}" for c in self.columns)
        key = ", ".join(quote(name) for name in self.key)
        return [
            *self.setup,
            f"CREATE TABLE {self.qualified} ({columns}, PRIMARY KEY ({key}) {self.key_options})"
            f"{self.table_suffix}",
            *self.after_create,
            self.insert(range(1, self.rows + 1)),
        ]

    def insert(self, numbers: Sequence[int], into: str | None = None) -> str:
        """One multi-row INSERT of rows ``numbers`` (into ``into``, default the table)."""
        names = ", ".join(quote(c.name) for c in self.written)
        order = [c.name for c in self.written]
        tuples = []
        for n in numbers:
            values = dict(zip(self.key, self.key_of(n), strict=True))
            values.update(zip([c.name for c in self.others], self.values_of(n), strict=True))
            tuples.append("(" + ", ".join(values[name] for name in order) + ")")
        return f"INSERT INTO {into or self.qualified} ({names}) VALUES {', '.join(tuples)}"

    def where(self, *numbers: int) -> str:
        """WHERE clause matching the rows of key numbers ``numbers``."""
        terms = []
        for n in numbers:
            pairs = zip(self.key, self.key_of(n), strict=True)
            terms.append("(" + " AND ".join(f"{quote(k)} = {v}" for k, v in pairs) + ")")
        return "WHERE " + " OR ".join(terms)

    def update_values(self, n: int, like: int) -> str:
        """Row ``n`` takes every written non-key value of row ``like``."""
        sets = ", ".join(
            f"{quote(c.name)} = {v}" for c, v in zip(self.others, self.values_of(like), strict=True)
        )
        return f"UPDATE {self.qualified} SET {sets} {self.where(n)}"

    def move_key(self, n: int, to: int) -> str:
        """Row ``n`` takes the key of row number ``to``."""
        sets = ", ".join(
            f"{quote(k)} = {v}" for k, v in zip(self.key, self.key_of(to), strict=True)
        )
        return f"UPDATE {self.qualified} SET {sets} {self.where(n)}"

    def set_note(self, text: str, *numbers: int) -> str:
        return f"UPDATE {self.qualified} SET {quote(self.note)} = '{text}' {self.where(*numbers)}"

    def delete(self, *numbers: int) -> str:
        return f"DELETE FROM {self.qualified} {self.where(*numbers)}"


# ---------------------------------------------------------------------------
# The standard rounds every shape runs unless it names its own
# ---------------------------------------------------------------------------


def _inserts(shape: Shape) -> list[Statements]:
    return [[shape.insert([31, 32, 33])], [shape.insert([21])], [shape.insert([22, 23])]]


def _multi_row_keys_and_deletes(shape: Shape) -> list[Statements]:
    return [
        [
            shape.insert([11, 12, 13]),
            shape.set_note("multi", 1, 2, 3),
            shape.update_values(4, 104),
        ],
        [shape.move_key(2, 202)],
        [shape.delete(5), shape.delete(6, 7)],
        [shape.update_values(202, 108)],
    ]


def _one_key_many_times(shape: Shape) -> list[Statements]:
    return [
        [
            shape.set_note("first", 3),
            shape.set_note("second", 3),
            shape.move_key(3, 303),
            shape.update_values(303, 109),
            shape.move_key(303, 313),
            shape.insert([400]),
            shape.delete(400),
            shape.delete(8),
            shape.insert([8]),
        ]
    ]


INSERTS = Round("inserts", _inserts, inserts_only=True)
MULTI_ROW_KEYS_AND_DELETES = Round(
    "multi-row statements, a key change and deletes", _multi_row_keys_and_deletes
)
ONE_KEY_MANY_TIMES = Round("one key changed many times in a transaction", _one_key_many_times)
STANDARD = (INSERTS, MULTI_ROW_KEYS_AND_DELETES, ONE_KEY_MANY_TIMES)
"""Each round ends with an extraction and a comparison; a round's transactions commit
one after another, so one extraction reads changes of several transactions."""


def rounds_for(shape: Shape, method: str) -> tuple[Round, ...]:
    """The rounds a case runs (insert-only methods: the inserting rounds only)."""
    rounds = shape.rounds or STANDARD
    if method in INSERT_ONLY:
        return tuple(r for r in rounds if r.inserts_only)
    return rounds


# ---------------------------------------------------------------------------
# Drawing the cases
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    shape: Shape
    method: str
    mode: str
    slot_scope: str = "table"
    """PG_LOGICAL's ``--incremental-pg-logical-slot``: ``database`` makes the table a member
    of its database's shared slot."""

    @property
    def id(self) -> str:
        member = "-member" if self.slot_scope == "database" else ""
        return f"{self.shape.dialect}-{self.shape.id}-{self.method}{member}-{self.mode}"


def cases(shapes: Sequence[Shape]) -> list[object]:
    """pytest params: each shape with each method that applies, the merge mode drawn so
    that modes alternate over a seeded order (each shape and each method meets both)."""
    rng = random.Random(DRAW_SEED)
    params: list[object] = []
    for shape in shapes:
        methods = [m for m in METHODS[shape.dialect] if shape.methods is None or m in shape.methods]
        first = rng.randrange(2)
        for index, method in enumerate(methods):
            mode = MODES[(first + index) % 2]
            case = Case(shape, method, mode)
            params.append(pytest.param(case, id=case.id))
    return params


def member_cases(shapes: Sequence[Shape]) -> list[object]:
    """pytest params: each PostgreSQL shape PG_LOGICAL applies to as a member of the shared
    slot, in the merge mode its own-slot case does not draw (both modes meet the shape),
    without its generated columns (pgoutput does not send them: enabling refuses them,
    tests/integration/test_shared_slot_members.py)."""
    params: list[object] = []
    for param in cases(shapes):
        case = param.values[0]  # type: ignore[attr-defined]
        if case.method == "PG_LOGICAL":
            other = MODES[1 - MODES.index(case.mode)]
            columns = tuple(column for column in case.shape.columns if not column.generated)
            shape = dataclasses.replace(case.shape, columns=columns)
            member = Case(shape, case.method, other, "database")
            params.append(pytest.param(member, id=member.id))
    return params


# ---------------------------------------------------------------------------
# Shapes: keys
# ---------------------------------------------------------------------------


def _text(n: int) -> str:
    return f"'k{n:04d}'"


def _day(dialect: str, n: int) -> str:
    text = f"'2024-{1 + n % 12:02d}-{1 + n % 28:02d}'" if n < 300 else f"'2030-01-{1 + n % 28:02d}'"
    return text if dialect == "sqlite" else f"DATE {text}"


def _plain_values(n: int) -> tuple[str, ...]:
    """note, amount"""
    return (f"'row {n}'", f"{n}.25")


PLAIN_COLUMNS = (Col("note", "VARCHAR(40)", "text"), Col("amount", "NUMERIC(12,2)", "decimal2"))


def key_shapes(dialect: str) -> list[Shape]:
    schema = "main" if dialect == "sqlite" else "app"
    setup = () if dialect == "sqlite" else ("CREATE SCHEMA app",)
    date_type = "DATE"
    uuid_type = "TEXT" if dialect == "sqlite" else "UUID"
    uuid_kind = "text" if dialect == "sqlite" else "uuid"

    def shape(
        id_: str,
        key_cols: tuple[Col, ...],
        key_of: Callable[[int], tuple[str, ...]],
        **extra: object,
    ) -> Shape:
        return Shape(
            id=id_,
            dialect=dialect,
            schema=schema,
            table=f"k_{id_}",
            columns=(*key_cols, *PLAIN_COLUMNS),
            key=tuple(c.name for c in key_cols),
            key_of=key_of,
            values_of=_plain_values,
            note="note",
            setup=setup,
            **extra,  # type: ignore[arg-type]
        )

    return [
        shape("int", (Col("id", "INTEGER NOT NULL", "int"),), lambda n: (str(n),)),
        shape(
            "int_text",
            (Col("id", "INTEGER NOT NULL", "int"), Col("code", "VARCHAR(10) NOT NULL", "text")),
            lambda n: (str(n % 5), _text(n)),
        ),
        shape(
            "date_text",
            (
                Col("day", f"{date_type} NOT NULL", "date"),
                Col("code", "VARCHAR(10) NOT NULL", "text"),
            ),
            lambda n: (_day(dialect, n), _text(n)),
        ),
        shape("text", (Col("code", "VARCHAR(20) NOT NULL", "text"),), lambda n: (f"'key é {n}'",)),
        shape(
            "uuid",
            (Col("id", f"{uuid_type} NOT NULL", uuid_kind),),
            lambda n: (f"'{uuid.UUID(int=n * 7919 + 1)}'",),
        ),
        shape(
            "numeric",
            (Col("id", "NUMERIC(20,4) NOT NULL", "decimal"),),
            lambda n: (f"{n}.{n % 10}{n % 7}05",),
        ),
        shape(
            "partition_column",
            (Col("id", "INTEGER NOT NULL", "int"),),
            lambda n: (str(n),),
            enable_flags=("--partition-columns=id", "--partition-granularity=100"),
        ),
        shape(
            "key_moves_lake_partition",
            (Col("region", "VARCHAR(10) NOT NULL", "text"), Col("id", "INTEGER NOT NULL", "int")),
            lambda n: ("'north'" if n < 200 else "'south'", str(n)),
            enable_flags=("--partition-columns=region",),
        ),
    ]


# ---------------------------------------------------------------------------
# Shapes: names
# ---------------------------------------------------------------------------


def _named(
    dialect: str,
    id_: str,
    schema: str,
    table: str,
    key: str,
    note: str,
    amount: str,
    **extra: object,
) -> Shape:
    setup = () if dialect == "sqlite" else (f"CREATE SCHEMA {quote(schema)}",)
    return Shape(
        id=id_,
        dialect=dialect,
        schema=schema,
        table=table,
        columns=(
            Col(key, "INTEGER NOT NULL", "int"),
            Col(note, "VARCHAR(40)", "text"),
            Col(amount, "NUMERIC(12,2)", "decimal2"),
        ),
        key=(key,),
        key_of=lambda n: (str(n),),
        values_of=_plain_values,
        note=note,
        setup=setup,
        **extra,  # type: ignore[arg-type]
    )


def name_shapes(dialect: str) -> list[Shape]:
    sqlite = dialect == "sqlite"
    longest = 128 if sqlite else 63  # PostgreSQL: 63 bytes; SQLite: gluon's limit for -t
    schema = "main" if sqlite else None

    def long(stem: str) -> str:
        return (stem + "_" + "x" * longest)[:longest]

    return [
        _named(
            dialect,
            "keywords",
            schema or "select",
            "order",
            "user",
            "from",
            "group",
        ),
        _named(dialect, "mixed_case", schema or "Sales", "OrderLines", "LineId", "Note", "Amount"),
        # Columns named as the capture code's own short names: transition-table aliases,
        # the trigger's NEW record.
        _named(dialect, "capture_names", schema or "capture", "changes", "n", "o", "new"),
        _named(
            dialect,
            "spaces_non_ascii",
            schema or "my shop",
            "bücher liste",
            "größe id",
            "straße note",
            "prix €",
        ),
        _named(
            dialect,
            "longest",
            schema or long("schema"),
            long("table"),
            long("key"),
            long("note"),
            long("amount"),
        ),
    ]


# ---------------------------------------------------------------------------
# Shapes: PostgreSQL declarative partitioning
# ---------------------------------------------------------------------------


def _attach_range(shape: Shape) -> list[Statements]:
    """A partition created after enable (attached, empty), rows moved into it."""
    part = f"{quote(shape.schema)}.{quote(shape.table + '_late')}"
    return [
        [
            f"CREATE TABLE {part} (LIKE {shape.qualified} INCLUDING DEFAULTS)",
            f"ALTER TABLE {shape.qualified} ATTACH PARTITION {part} "
            "FOR VALUES FROM (1000) TO (2000)",
        ],
        [shape.insert([1001, 1002]), shape.move_key(9, 1009), shape.set_note("late", 1001)],
    ]


ATTACH_RANGE = Round("a partition attached after enable", _attach_range)


def _region(n: int) -> str:
    return ("'north'", "'south'", "'east'")[0 if n < 200 else 1 if n < 300 else 2]


def _move_region(shape: Shape) -> list[Statements]:
    """Rows move between source partitions (a non-key column that partitions)."""
    return [[f"UPDATE {shape.qualified} SET {quote('region')} = 'east' {shape.where(1, 10)}"]]


MOVE_REGION = Round("rows moved between partitions", _move_region)


def partitioned_shapes() -> list[Shape]:
    schema = "app"
    setup = ("CREATE SCHEMA app",)

    def shape(
        id_: str,
        key: tuple[Col, ...],
        key_of: Callable[[int], tuple[str, ...]],
        suffix: str,
        parts: tuple[tuple[str, str, str], ...],
        **extra: object,
    ) -> Shape:
        table = f"p_{id_}"
        return Shape(
            id=id_,
            dialect="postgresql",
            schema=schema,
            table=table,
            columns=(*key, *PLAIN_COLUMNS),
            key=tuple(c.name for c in key),
            key_of=key_of,
            values_of=_plain_values,
            note="note",
            setup=setup,
            table_suffix=f" PARTITION BY {suffix}",
            after_create=tuple(
                f"CREATE TABLE {quote(schema)}.{quote(table + leaf)} PARTITION OF "
                f"{quote(schema)}.{quote(table + parent)} {bound}"
                for leaf, parent, bound in parts
            ),
            **extra,  # type: ignore[arg-type]
        )

    by_id = (Col("id", "INTEGER NOT NULL", "int"),)
    region_id = (
        Col("region", "VARCHAR(10) NOT NULL", "text"),
        Col("id", "INTEGER NOT NULL", "int"),
    )
    return [
        shape(
            "range",
            by_id,
            lambda n: (str(n),),
            "RANGE (id)",
            (
                ("_low", "", "FOR VALUES FROM (MINVALUE) TO (100)"),
                ("_mid", "", "FOR VALUES FROM (100) TO (300)"),
                ("_high", "", "FOR VALUES FROM (300) TO (1000)"),
            ),
            rounds=(*STANDARD, ATTACH_RANGE),
        ),
        shape(
            "list",
            region_id,
            lambda n: (_region(n), str(n)),
            "LIST (region)",
            (
                ("_north", "", "FOR VALUES IN ('north')"),
                ("_south", "", "FOR VALUES IN ('south')"),
                ("_rest", "", "DEFAULT"),
            ),
            rounds=(*STANDARD, MOVE_REGION),
        ),
        shape(
            "hash",
            by_id,
            lambda n: (str(n),),
            "HASH (id)",
            tuple((f"_{r}", "", f"FOR VALUES WITH (MODULUS 3, REMAINDER {r})") for r in range(3)),
        ),
        shape(
            "two_levels",
            region_id,
            lambda n: (_region(n), str(n)),
            "LIST (region)",
            (
                ("_north", "", "FOR VALUES IN ('north') PARTITION BY RANGE (id)"),
                ("_north_a", "_north", "FOR VALUES FROM (MINVALUE) TO (5)"),
                ("_north_b", "_north", "FOR VALUES FROM (5) TO (MAXVALUE)"),
                ("_other", "", "DEFAULT PARTITION BY HASH (id)"),
                ("_other_0", "_other", "FOR VALUES WITH (MODULUS 2, REMAINDER 0)"),
                ("_other_1", "_other", "FOR VALUES WITH (MODULUS 2, REMAINDER 1)"),
            ),
            rounds=(*STANDARD, MOVE_REGION),
        ),
    ]


# ---------------------------------------------------------------------------
# Shapes: types at their edges
# ---------------------------------------------------------------------------


def _cycle(options: Sequence[str], n: int) -> str:
    return options[n % len(options)]


def _toast(n: int) -> str:
    """About 64 KB that does not compress away: stored out of line (TOASTed)."""
    return f"(SELECT string_agg(md5(g::text || '{n}'), '') FROM generate_series(1, 2000) g)"


PG_EDGES: tuple[tuple[str, str, str, Sequence[str]], ...] = (
    # name, declared type, kind, values (SQL literals, cycled by row number)
    ("note", "VARCHAR(40)", "text", ("'plain'", "'ünïcødé ✓'", "''", "NULL")),
    (
        "n38",
        "NUMERIC(38,0)",
        "decimal",
        (
            "99999999999999999999999999999999999999",
            "-99999999999999999999999999999999999999",
            "0",
            "NULL",
        ),
    ),
    (
        "n38s",
        "NUMERIC(38,38)",
        "decimal",
        (
            "0.99999999999999999999999999999999999999",
            "-0.00000000000000000000000000000000000001",
            "0",
            "NULL",
        ),
    ),
    ("n2", "NUMERIC(10,2)", "decimal", ("-0.01", "12345678.90", "0.10", "NULL")),
    (
        "nfree",
        "NUMERIC",
        "number_text",
        (
            "'NaN'",
            "'Infinity'",
            "'-Infinity'",
            "123456789012345678901234567890123456789012345.678901234567890",
            "0.000",
            "1e-60",
        ),
    ),
    # No '-0': the changelog triggers' to_jsonb round trip makes it 0 (reported). NaN
    # beside a single other value: float_nan_shapes.
    (
        "f8",
        "DOUBLE PRECISION",
        "float64",
        (
            "'NaN'",
            "'Infinity'",
            "'-Infinity'",
            "5e-324",
            "1.7976931348623157e308",
            "-2.5",
        ),
    ),
    ("f4", "REAL", "float32", ("3.4028235e38", "-1.1754944e-38", "0.1", "'-Infinity'")),
    (
        "tstz",
        "TIMESTAMPTZ",
        "timestamp_utc",
        (
            "'2024-03-10 02:30:00-08'",
            "'0001-01-01 12:00:00+00'",
            "'9999-12-31 12:59:59.999999+00'",
            "'2024-06-30 23:59:59.999999+05:45'",
        ),
    ),
    (
        "ts",
        "TIMESTAMP",
        "timestamp",
        (
            "'0001-01-01 00:00:00'",
            "'9999-12-31 23:59:59.999999'",
            "'2000-02-29 12:00:00.5'",
        ),
    ),
    ("d", "DATE", "date", ("'0001-01-01'", "'9999-12-31'", "'2000-02-29'")),
    ("tm", "TIME", "time", ("'00:00:00'", "'23:59:59.999999'", "'12:34:56.5'")),
    (
        "tmtz",
        "TIMETZ",
        "timetz",
        (
            "'12:00:00+01'",
            "'11:00:00+00'",
            "'23:59:59.999999-15:59'",
            "'00:00:00+05:45'",
        ),
    ),
    (
        "iv",
        "INTERVAL",
        "text",
        (
            "'1 mon'",
            "'30 days'",
            "'-1 year 2 mons -3 days 04:05:06.789'",
            "'178000000 years'",
            "'00:00:00.000001'",
        ),
    ),
    ("b", "BYTEA", "binary", ("'\\x00'", "'\\x000102ff00'", "''", "NULL")),
    (
        "js",
        "JSON",
        "json",
        (
            """'{"b": 1, "a": [1.50, 2e3, null, true]}'""",
            "'[]'",
            """'{"k": "ünï\\n"}'""",
            "'1.000'",
        ),
    ),
    (
        "jb",
        "JSONB",
        "json",
        (
            """'{"z": 1, "a": {"x": [1, 2.50]}}'""",
            "'null'",
            """'"text"'""",
            "'{}'",
        ),
    ),
    ("ip", "INET", "inet", ("'192.168.0.1/24'", "'10.0.0.1'", "'::1'", "'2001:db8::ff/64'")),
    ("net", "CIDR", "cidr", ("'10.0.0.0/8'", "'2001:db8::/32'", "'192.168.1.0/24'")),
    ("mood", "app.mood", "text", ("'sad'", "'ok'", "'happy'", "NULL")),
    ("code", "app.code", "text", ("'A-1'", "'ß'", "'x'")),
    (
        "u",
        "UUID",
        "uuid",
        (
            "'00000000-0000-0000-0000-000000000000'",
            "'ffffffff-ffff-ffff-ffff-ffffffffffff'",
            "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'",
        ),
    ),
    ("flag", "BOOLEAN", "bool", ("true", "false", "NULL")),
)


def float_nan_shapes() -> list[Shape]:
    """PostgreSQL float columns holding NaN beside a single other value: a Delta file of
    such rows is logged with min = max (NaN left out of the statistics), which the engine
    once read as the whole column (every NaN came back as that value). One plain shape,
    one with a composite keyword-named key and keyword-named float columns."""

    def nan_or(n: int, value: str) -> str:
        return "'NaN'" if n % 3 == 0 else value

    plain = Shape(
        id="float_nan",
        dialect="postgresql",
        schema="app",
        table="f_nan",
        columns=(
            Col("id", "INTEGER NOT NULL", "int"),
            Col("f8", "DOUBLE PRECISION", "float64"),
            Col("f4", "REAL", "float32"),
            Col("note", "VARCHAR(40)", "text"),
        ),
        key=("id",),
        key_of=lambda n: (str(n),),
        values_of=lambda n: (nan_or(n, "2.5"), nan_or(n, "-1.5"), _text(n)),
        note="note",
        setup=("CREATE SCHEMA app",),
    )
    keywords = Shape(
        id="float_nan_keywords",
        dialect="postgresql",
        schema="select",
        table="order",
        columns=(
            Col("from", "INTEGER NOT NULL", "int"),
            Col("group", "VARCHAR(10) NOT NULL", "text"),
            Col("where", "DOUBLE PRECISION", "float64"),
            Col("user", "VARCHAR(40)", "text"),
        ),
        key=("from", "group"),
        key_of=lambda n: (str(n % 4), f"'g{n}'"),
        values_of=lambda n: (nan_or(n, "1e300"), _text(n)),
        note="user",
        setup=('CREATE SCHEMA "select"',),
    )
    return [plain, keywords]


def pg_type_shape() -> Shape:
    edges = PG_EDGES

    def values_of(n: int) -> tuple[str, ...]:
        return (*(_cycle(values, n + i) for i, (_, _, _, values) in enumerate(edges)), _toast(n))

    return Shape(
        id="edges",
        dialect="postgresql",
        schema="app",
        table="edges",
        columns=(
            Col("id", "INTEGER NOT NULL", "int"),
            *(Col(name, declared, kind) for name, declared, kind, _ in edges),
            Col("doc", "TEXT", "text"),
            Col("twice", "BIGINT GENERATED ALWAYS AS (id * 2) STORED", "int", generated=True),
        ),
        key=("id",),
        key_of=lambda n: (str(n),),
        values_of=values_of,
        note="note",
        setup=(
            "CREATE SCHEMA app",
            "CREATE TYPE app.mood AS ENUM ('sad', 'ok', 'happy')",
            "CREATE DOMAIN app.code AS VARCHAR(10) CHECK (VALUE <> '')",
        ),
        # PG_LOGICAL needs the old row in the WAL to carry a TOASTed value an UPDATE leaves
        # unchanged (docs/operations.md); without it extraction stops and says so.
        after_create=("ALTER TABLE app.edges REPLICA IDENTITY FULL",),
    )


SQLITE_EDGES: tuple[tuple[str, str, str, Sequence[str]], ...] = (
    ("note", "TEXT", "text", ("'plain'", "'ünïcødé ✓'", "''", "NULL")),
    ("big", "INTEGER", "int", ("9223372036854775807", "-9223372036854775808", "0")),
    ("r", "REAL", "float64", ("9e999", "-9e999", "-0.0", "5e-324", "1.7976931348623157e308")),
    ("n2", "NUMERIC(10,2)", "decimal2", ("-0.01", "12345678.9", "0.1", "NULL")),
    ("d", "DATE", "date", ("'0001-01-01'", "'9999-12-31'", "'2000-02-29'")),
    (
        "dtm",
        "DATETIME",
        "timestamp",
        (
            "'0001-01-01 00:00:00'",
            "'9999-12-31 23:59:59.999999'",
            "'2000-02-29 12:00:00.5'",
        ),
    ),
    ("b", "BLOB", "binary", ("x'00'", "x'000102ff00'", "x''", "NULL")),
    ("flag", "BOOLEAN", "bool", ("1", "0", "NULL")),
    ("js", "JSON", "json", ("""'{"b": 1, "a": [1.50, 2e3, null, true]}'""", "'[]'", "'1.000'")),
)


def sqlite_type_shape() -> Shape:
    edges = SQLITE_EDGES

    def values_of(n: int) -> tuple[str, ...]:
        big = f"replace(hex(zeroblob(40000)), '00', 'é{n}')"
        return (*(_cycle(values, n + i) for i, (_, _, _, values) in enumerate(edges)), big)

    return Shape(
        id="edges",
        dialect="sqlite",
        schema="main",
        table="edges",
        columns=(
            Col("id", "INTEGER NOT NULL", "int"),
            *(Col(name, declared, kind) for name, declared, kind, _ in edges),
            Col("doc", "TEXT", "text"),
        ),
        key=("id",),
        key_of=lambda n: (str(n),),
        values_of=values_of,
        note="note",
    )


# ---------------------------------------------------------------------------
# Shapes: DML that needs its own table
# ---------------------------------------------------------------------------

TRIGGER_METHODS = frozenset({"CHANGELOG", "UPDATABLE_CHANGELOG", "CHANGELOG_INSERT"})


def _shift_keys_up(shape: Shape) -> list[Statements]:
    # Extracted alone: key 1 must leave the lake (the rounds after put every key back).
    return [[f"UPDATE {shape.qualified} SET id = id + 1"]]


def _shift_keys(shape: Shape) -> list[Statements]:
    table = shape.qualified
    return [
        [f"UPDATE {table} SET id = id - 1", shape.insert([11])],
        [f"UPDATE {table} SET id = 12 - id"],  # reverses the order: every key onto another
    ]


def _truncate(shape: Shape) -> list[Statements]:
    return [[f"TRUNCATE {shape.qualified}"], [shape.insert([31, 32])]]


def _truncate_and_insert(shape: Shape) -> list[Statements]:
    return [[f"TRUNCATE {shape.qualified}", shape.insert([1, 41])], [shape.insert([42])]]


def _update_truncate_and_insert(shape: Shape) -> list[Statements]:
    """Merging methods: an update before the TRUNCATE in its transaction, one after."""
    return [
        [shape.set_note("before", 1), f"TRUNCATE {shape.qualified}", shape.insert([1, 51])],
        [shape.set_note("after", 1), shape.insert([52])],
    ]


def _delete_all(shape: Shape) -> list[Statements]:
    return [
        [f"DELETE FROM {shape.qualified}"],
        [shape.insert([1, 2]), f"DELETE FROM {shape.qualified}", shape.insert([3])],
    ]


def dml_shapes(dialect: str) -> list[Shape]:
    sqlite = dialect == "sqlite"
    schema = "main" if sqlite else "app"
    setup = () if sqlite else ("CREATE SCHEMA app",)
    merging = tuple(m for m in METHODS[dialect] if m not in INSERT_ONLY)

    def shape(id_: str, rounds: tuple[Round, ...], **extra: object) -> Shape:
        return Shape(
            id=id_,
            dialect=dialect,
            schema=schema,
            table=f"d_{id_}",
            columns=(Col("id", "INTEGER NOT NULL", "int"), *PLAIN_COLUMNS),
            key=("id",),
            key_of=lambda n: (str(n),),
            values_of=_plain_values,
            note="note",
            setup=setup,
            rounds=rounds,
            **extra,  # type: ignore[arg-type]
        )

    if sqlite:
        return [shape("delete_all", (Round("DELETE without WHERE", _delete_all),), methods=merging)]
    # TRUNCATE runs on CHANGELOG_INSERT too (the lake empties, then takes inserts);
    # UPDATABLE_INSERT has no trigger on the table to see it.
    truncating = (*merging, "CHANGELOG_INSERT")
    return [
        shape(
            "shifted_keys",
            (
                Round("keys shifted up", _shift_keys_up),
                Round("keys shifted back and reversed", _shift_keys),
            ),
            key_options="DEFERRABLE INITIALLY DEFERRED",
            # PG_LOGICAL refuses a DEFERRABLE key (test_pg_logical_shapes.py).
            methods=tuple(m for m in merging if m != "PG_LOGICAL"),
        ),
        shape(
            "truncate",
            (Round("TRUNCATE, then inserts", _truncate, inserts_only=True),),
            methods=truncating,
        ),
        shape(
            "truncate_and_insert",
            (
                Round(
                    "TRUNCATE and inserts in one transaction",
                    _truncate_and_insert,
                    inserts_only=True,
                ),
                Round(
                    "an update, TRUNCATE and inserts in one transaction",
                    _update_truncate_and_insert,
                ),
            ),
            methods=truncating,
        ),
    ]
