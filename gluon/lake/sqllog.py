"""Records every SQL statement sent to Spark, for the engine-portability check.

When ``GLUON_RECORD_SQL`` names a file, each statement is appended to it as
one JSON line; the test suite parses them and checks them against the portable
subset (tests/support/portable_sql.py).
"""

from __future__ import annotations

import json
import os


def record(kind: str, text: str) -> None:
    """Append a statement (or a writer option set) to the record file, if enabled."""
    path = os.environ.get("GLUON_RECORD_SQL")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"kind": kind, "text": text}) + "\n")
