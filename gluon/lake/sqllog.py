"""Records every SQL statement sent to Spark, for the engine-portability check.

When ``GLUON_RECORD_SQL`` names a file, each statement is appended to it as
one JSON line; the test suite checks them against the portable subset.
"""

from __future__ import annotations

import json
import os
import re

# Constructs outside the subset that works on both Sail and Spark+Delta (DESIGN.md section 1).
FORBIDDEN: dict[str, re.Pattern[str]] = {
    "INSERT OVERWRITE": re.compile(r"\bINSERT\s+OVERWRITE\b", re.I),
    "ALTER TABLE ... RENAME": re.compile(r"\bALTER\s+TABLE\b.*\bRENAME\b", re.I | re.S),
    "DESCRIBE HISTORY": re.compile(r"\bDESCRIBE\s+HISTORY\b", re.I),
    "OPTIMIZE": re.compile(r"^\s*OPTIMIZE\b", re.I),
    "VACUUM": re.compile(r"^\s*VACUUM\b", re.I),
    "RESTORE": re.compile(r"^\s*RESTORE\b", re.I),
    "dynamic partition overwrite": re.compile(r"partitionOverwriteMode", re.I),
    "view over a delta path": re.compile(r"\bVIEW\b.*\bdelta\.`", re.I | re.S),
}


def violations(statement: str) -> list[str]:
    """Names of the forbidden constructs ``statement`` uses."""
    return [name for name, pattern in FORBIDDEN.items() if pattern.search(statement)]


def record(kind: str, text: str) -> None:
    """Append a statement (or a writer option set) to the record file, if enabled."""
    path = os.environ.get("GLUON_RECORD_SQL")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"kind": kind, "text": text}) + "\n")
