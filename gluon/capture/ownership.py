"""What gluon owns: ownership markers on source objects and lake tables.

Every object gluon creates carries a marker ``gluon:<installation-id>:<TABLE_KEY>``:
the random id of the repository that created it (``Repository.installation_id``,
migration 8) and the application table it serves. In the source it is a
``COMMENT`` (PostgreSQL, Oracle tables and views), a comment inside the object's
``CREATE`` text (SQLite, Oracle triggers); in the lake a small file in the Delta
table's folder (:data:`LAKE_MARKER`, a hidden name Delta readers and VACUUM skip).

Enabling refuses an existing object it does not own and says whose it is;
disabling drops only what it owns. ``--incremental-take-over-objects`` adopts
objects of another installation, or unmarked ones shaped like gluon's (an object
of another table of this installation, or one of the wrong shape, never).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum

from gluon.lake import storage

MARKER_PREFIX = "gluon:"
_MARKER = re.compile(r"gluon:([0-9a-f]{32}):(.*?)(?:\s*\*/|\s*$)", re.MULTILINE)

LAKE_MARKER = "_gluon_owner.json"
"""The marker file in a lake table's folder (``_`` names are invisible to Delta and VACUUM)."""

TAKE_OVER_OPTION = "--incremental-take-over-objects"


class Ownership(StrEnum):
    """How an existing object relates to this installation and table."""

    OURS = "ours"
    """Marked by this installation for this table."""
    OTHER_TABLE = "other table"
    """Marked by this installation for another table."""
    OTHER_INSTALLATION = "other installation"
    """Marked by another gluon installation (another repository)."""
    FOREIGN = "not gluon's"
    """No gluon marker: the application's, a user's, or made by a gluon without markers."""


@dataclass(frozen=True, slots=True)
class Marker:
    installation_id: str
    table_key: str

    @property
    def text(self) -> str:
        return f"{MARKER_PREFIX}{self.installation_id}:{self.table_key}"

    @property
    def sql_literal(self) -> str:
        """The marker as a SQL string literal (for ``COMMENT ... IS``)."""
        return "'" + self.text.replace("'", "''") + "'"

    @property
    def sql_comment(self) -> str:
        """The marker as the text of a SQL comment (``/* ... */`` or ``-- ...``)."""
        return self.text.replace("*/", "*\\/").replace("\n", " ")


def parse_marker(text: str | None) -> Marker | None:
    """The gluon marker in ``text`` (a comment, or a ``CREATE`` text), if any."""
    if not text:
        return None
    match = _MARKER.search(text)
    if match is None:
        return None
    return Marker(match.group(1), match.group(2).strip().replace("*\\/", "*/"))


def classify(found: Marker | None, mine: Marker, *, per_table: bool = True) -> Ownership:
    """How ``found`` (an object's marker) relates to ``mine``.

    Args:
        per_table: the object serves one table (False for a schema several tables share).
    """
    if found is None:
        return Ownership.FOREIGN
    if found.installation_id != mine.installation_id:
        return Ownership.OTHER_INSTALLATION
    if per_table and found.table_key != mine.table_key:
        return Ownership.OTHER_TABLE
    return Ownership.OURS


def describe(ownership: Ownership, found: Marker | None) -> str:
    """Whose an object is, in a few words for a message."""
    if ownership is Ownership.OTHER_TABLE and found:
        return f"it belongs to table {found.table_key} of this gluon installation"
    if ownership is Ownership.OTHER_INSTALLATION and found:
        return (
            f"another gluon installation (id {found.installation_id}) made it for {found.table_key}"
        )
    if ownership is Ownership.OURS:
        return "it is this installation's"
    return "it is not gluon's"


# -- lake tables ----------------------------------------------------------------------------


def mark_lake_table(location: str, marker: Marker) -> None:
    """Write the owner file into the lake table at ``location`` (local lakes only)."""
    if not storage.is_local(location):
        return
    folder = storage.local_path(location)
    folder.mkdir(parents=True, exist_ok=True)
    payload = {"installation_id": marker.installation_id, "table_key": marker.table_key}
    (folder / LAKE_MARKER).write_text(json.dumps(payload) + "\n", encoding="utf-8")


def lake_table_marker(location: str) -> Marker | None:
    """The owner recorded in the lake table at ``location`` (None: none, or not local)."""
    if not storage.is_local(location):
        return None
    path = storage.local_path(location) / LAKE_MARKER
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        return Marker(str(payload["installation_id"]), str(payload["table_key"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


__all__ = [
    "LAKE_MARKER",
    "TAKE_OVER_OPTION",
    "Marker",
    "Ownership",
    "classify",
    "describe",
    "lake_table_marker",
    "mark_lake_table",
    "parse_marker",
]
