"""Object names for every dialect and the lake (docs/architecture.md, section 1).

Names past a dialect's length limit keep a readable prefix and end in a stable
hash of the full name, so the same table always gets the same short name.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from gluon.errors import UsageError

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_$#]*$")
# -t: each part a plain identifier (letters of any script, digits, _ $ #) or "a quoted one"
# ("" is a quote). Refused even quoted: the dot (gluon's lake names use it as the separator),
# slashes and control characters (the table's key names lock files).
_NAME_PART = re.compile(r'"(?P<quoted>(?:[^"./\\\x00-\x1f]|"")+)"|(?P<plain>[^\W\d][\w$#]*)')
HASH_LENGTH = 8
MAX_NAME_LENGTH = 128
"""The longest schema or table name any supported source allows (Oracle 12.2+)."""
_LAKE_SAFE = re.compile(r"^[a-z_][a-z0-9_]*$")


def join(root: str, *parts: str) -> str:
    """Join path parts below a root path or URI."""
    return "/".join([root.rstrip("/"), *parts])


def lake_identifier(name: str) -> str:
    """The name gluon stores ``name`` (lower-cased) under in the lake: itself when it is
    plain (``[a-z_][a-z0-9_]*``), else a readable escape plus a hash of the name.

    Used for lake directories, Delta column names and the catalog objects views read:
    object store URIs must not see ``#`` or ``%``, and the embedded engine re-parses view
    bodies without their quotes (a ``$``, ``#`` or space there fails).
    """
    lowered = name.lower()
    if _LAKE_SAFE.match(lowered):
        return lowered
    escaped = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in lowered)
    digest = hashlib.sha1(lowered.encode("utf-8")).hexdigest()[:HASH_LENGTH]
    return re.sub("_+", "_", f"gl_{escaped[:40]}_{digest}")


@dataclass(frozen=True, slots=True)
class TableRef:
    """A ``SCHEMA.TABLE`` as the user typed it; compare with :attr:`key`."""

    schema: str
    table: str

    @classmethod
    def parse(cls, text: str) -> TableRef:
        """Parse ``SCHEMA.TABLE``; either part may be ``"quoted"`` (spaces, any character).

        Raises:
            UsageError: the text is not two identifiers joined by a dot.
        """
        parts: list[str] = []
        rest = text.strip()
        while True:
            match = _NAME_PART.match(rest)
            if match is None:
                break
            quoted = match.group("quoted")
            parts.append(quoted.replace('""', '"') if quoted is not None else match.group(0))
            rest = rest[match.end() :]
            if not rest.startswith("."):
                break
            rest = rest[1:]
        if len(parts) != 2 or rest:
            raise UsageError(
                "-t expects SCHEMA.TABLE (two identifiers joined by a dot; quote a part with "
                f'spaces or other characters as "My Table"), found {text!r}'
            )
        too_long = [part for part in parts if len(part) > MAX_NAME_LENGTH]
        if too_long:
            raise UsageError(
                f"-t: the name {too_long[0][:30]!r}... ({len(too_long[0])} characters) is longer "
                f"than the {MAX_NAME_LENGTH} characters any supported database allows"
            )
        return cls(parts[0], parts[1])

    @property
    def key(self) -> str:
        """Case-insensitive identity, upper-cased in the spec's style."""
        return f"{self.schema.upper()}.{self.table.upper()}"

    def __str__(self) -> str:
        return self.key


def name_size(name: str, *, in_bytes: bool = False) -> int:
    """The length a database counts: characters, or UTF-8 bytes (Oracle's limit is in bytes
    of the database character set, AL32UTF8 by default: a CJK character takes 3)."""
    return len(name.encode("utf-8")) if in_bytes else len(name)


def shorten(name: str, limit: int | None, *, in_bytes: bool = False) -> str:
    """Return ``name`` or, past ``limit`` characters (or bytes), a prefix plus a stable hash."""
    if limit is None or name_size(name, in_bytes=in_bytes) <= limit:
        return name
    digest = hashlib.sha1(name.upper().encode("utf-8")).hexdigest()[:HASH_LENGTH]
    room = limit - HASH_LENGTH - 1
    prefix = name[:room]
    while name_size(prefix, in_bytes=in_bytes) > room:
        prefix = prefix[:-1]  # a multi-byte character does not fit whole
    return f"{prefix}_{digest}"


@dataclass(frozen=True, slots=True)
class QualifiedName:
    """A schema-qualified object name."""

    schema: str
    name: str

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True, slots=True)
class SourceObjectNames:
    """Names of the objects incremental update creates in the source database."""

    changelog_table: QualifiedName
    changelog_sequence: QualifiedName
    changelog_trigger: QualifiedName
    updatable_view: QualifiedName
    updatable_trigger: QualifiedName
    lake_rows_table: QualifiedName
    """gluon's own: lake rows staged for patching through the updatable view."""
    replication_slot: QualifiedName
    """A logical replication slot: cluster-wide, in no schema (the table's schema is
    recorded); lower-case letters, digits and underscores only."""


def source_object_names(
    ref: TableRef,
    *,
    max_length: int | None,
    has_schemas: bool,
    fold: str = "upper",
    changelog_table: str | None = None,
    database: str | None = None,
    in_bytes: bool = False,
) -> SourceObjectNames:
    """Names of the source-side objects for ``ref``.

    Args:
        ref: the application table.
        max_length: the dialect's identifier length limit (None: unlimited).
        has_schemas: True where a hybrid schema ``SCHEMA_H`` holds the objects;
            False (SQLite) puts them in the table's own schema with an
            ``SCHEMA_H_`` name prefix.
        fold: ``upper`` or ``lower``, the dialect's case for unquoted names.
        changelog_table: the ``--incremental-changelog-table`` override.
        database: the source database, part of the slot's name (slots are cluster-wide).
        in_bytes: ``max_length`` counts UTF-8 bytes, not characters (Oracle).
    """

    def folded(text: str) -> str:
        return text.upper() if fold == "upper" else text.lower()

    # fit() below shortens it: a schema name at the dialect's limit leaves no room for "_H",
    # which the server would cut silently (PostgreSQL), looking for a schema that is not there.
    hybrid = f"{ref.schema}_H"

    def fit(text: str) -> str:
        return shorten(text, max_length, in_bytes=in_bytes)

    def name(suffix: str) -> QualifiedName:
        if has_schemas:
            return QualifiedName(folded(fit(hybrid)), folded(fit(f"{ref.table}{suffix}")))
        plain = fit(f"{hybrid}_{ref.table}{suffix}")
        return QualifiedName(folded(ref.schema), folded(plain))

    log = name("_LOG")
    if changelog_table:
        override = changelog_table.strip().split(".")
        if len(override) not in (1, 2) or not all(_IDENTIFIER.match(part) for part in override):
            raise UsageError(
                "--incremental-changelog-table expects TABLE or SCHEMA.TABLE (plain "
                f"identifiers), found {changelog_table!r}"
            )
        too_long = [
            part
            for part in override
            if max_length and name_size(part, in_bytes=in_bytes) > max_length
        ]
        if too_long:
            unit = "bytes" if in_bytes else "characters"
            raise UsageError(
                f"--incremental-changelog-table: {too_long[0]!r} is longer than the "
                f"{max_length} {unit} this database allows"
            )
        log = (
            QualifiedName(folded(override[0]), folded(override[1]))
            if len(override) == 2
            else QualifiedName(log.schema, folded(override[0]))
        )
    return SourceObjectNames(
        changelog_table=log,
        changelog_sequence=name("_SEQ"),
        # Suffixes of 3-4 characters, no two ending alike: no table's object is named like
        # another table's (a bare table name for the trigger made table X_UV's trigger X's
        # updatable trigger X_UV, and re-creating one dropped the other).
        changelog_trigger=name("_CT"),
        updatable_view=name("_UV"),
        updatable_trigger=name("_UV"),
        lake_rows_table=name("_LK"),
        replication_slot=QualifiedName(folded(ref.schema), slot_name(ref, database)),
    )


SLOT_NAME_LENGTH = 63
"""PostgreSQL's limit on a replication slot's name."""


def slot_name(ref: TableRef, database: str | None = None) -> str:
    """The replication slot of ``ref``: ``gluon_<database>_<schema>_<table>`` (slots are
    cluster-wide: the same table in two databases needs two), lower case, with every
    character a slot name refuses (anything but a-z, 0-9, _) made an underscore."""
    parts = ["gluon", *([database] if database else []), ref.schema, ref.table]
    plain = re.sub(r"[^a-z0-9_]", "_", "_".join(parts).lower())
    return shorten(plain, SLOT_NAME_LENGTH).lower()


def database_slot_name(database: str, installation: str) -> str:
    """The replication slot (and publication) every PG_LOGICAL table of ``database`` shares
    in one installation: ``gluondb_<database>_<installation's first 8 characters>``, made like
    :func:`slot_name` (a prefix no table's slot has, so the two kinds never meet). Two
    installations reading one database each have their own: a slot is confirmed to the least
    position of the tables one repository knows."""
    plain = re.sub(r"[^a-z0-9_]", "_", f"gluondb_{database}_{installation[:8]}".lower())
    return shorten(plain, SLOT_NAME_LENGTH).lower()


@dataclass(frozen=True, slots=True)
class LakeNames:
    """Names of the lake objects for one offloaded table (lower case, as Spark shows them).

    The user view carries the table's own name; everything else (what views read, and
    the directories) uses :func:`lake_identifier` forms, the same for plain names.
    """

    schema: str
    table: str

    @property
    def stored_schema(self) -> str:
        return lake_identifier(self.schema)

    @property
    def stem(self) -> str:
        """The table's part of gluon's own object and directory names."""
        return lake_identifier(self.table)

    @property
    def load_schema(self) -> str:
        return f"{self.stored_schema}_load"

    @property
    def user_view(self) -> QualifiedName:
        return QualifiedName(self.schema, self.table)

    @property
    def base_table(self) -> QualifiedName:
        return QualifiedName(self.stored_schema, f"{self.stem}_data")

    @property
    def delta_table(self) -> QualifiedName:
        return QualifiedName(self.load_schema, f"{self.stem}_changes")

    def internal_view(self, generation: int) -> QualifiedName:
        return QualifiedName(self.stored_schema, f"{self.stem}_internal_user_view_{generation}")

    def schema_dir(self, schema: str | None = None) -> str:
        """The directory of a lake schema below the lake root."""
        return f"{lake_identifier(schema or self.schema)}.db"

    # Every lake location gluon writes is built below (docs/architecture.md, section 1).

    def base_path(self, root: str) -> str:
        """The base table's first location."""
        return join(root, self.schema_dir(), f"{self.stem}_data")

    def reset_stage_path(self, root: str, stamp: int) -> str:
        """Where ``--reset-backend-table`` writes its new copy: a folder inside the base's
        first location, published there in one overwrite commit (the path never moves)."""
        return join(self.base_path(root), f"gluon_reset_r{stamp}")

    def compacted_base_path(self, root: str, run_id: int) -> str:
        """Where a full compaction (run ``run_id``) of an older gluon wrote a new base table
        (the base now keeps one path: :func:`stable_base_path` leads back to it)."""
        return join(root, self.schema_dir(), f"{self.stem}_data_c{run_id}")

    def delta_path(self, root: str) -> str:
        """The delta table's location."""
        return join(root, self.schema_dir(self.load_schema), f"{self.stem}_changes")

    def run_table(self, root: str, suffix: str, run_id: int) -> tuple[QualifiedName, str]:
        """Name and location of a compaction run's own table in the load schema."""
        table = f"{self.stem}_{suffix}_{run_id}"
        location = join(root, self.schema_dir(self.load_schema), table)
        return QualifiedName(self.load_schema, table), location

    def new_base_table(self, run_id: int) -> QualifiedName:
        """The catalog name of the new base a partition-wise compaction writes."""
        return QualifiedName(self.load_schema, f"gl_new_base_{run_id}")


def retained_base_table(base_table: str, run_id: int) -> str:
    """The name a base table replaced by compaction run ``run_id`` is retained under."""
    return f"{base_table}_r{run_id}"


def control_partition_path(delta_path: str, column: str, partition: int) -> str:
    """The directory of one control partition of the delta table."""
    return join(delta_path, f"{column}={partition}")


def lake_names(ref: TableRef) -> LakeNames:
    """Lake names for ``ref``."""
    return LakeNames(ref.schema.lower(), ref.table.lower())


_MOVED_BASE = re.compile(r"_c[0-9]+/*$")


def stable_base_path(base_path: str) -> str:
    """The one path a base table keeps for life: ``base_path`` itself, or the first path of
    a base an older gluon's full compaction moved to ``..._data_cNN``."""
    return _MOVED_BASE.sub("", base_path)
