"""Read the statements gluon recorded for the engine-portability check.

``GLUON_RECORD_SQL`` names a file that gluon/lake/sqllog.py appends to: one
JSON object per line, ``{"kind": "sql" | "write", "text": ...}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.portable_sql import violations

__all__ = ["read_statements", "violating_statements"]


def read_statements(path: Path) -> list[dict[str, Any]]:
    """Every recorded statement, in order (an absent file holds none)."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def violating_statements(path: Path) -> list[tuple[str, str]]:
    """``(what is wrong, statement text)`` for each recorded statement outside the subset."""
    found = []
    for statement in read_statements(path):
        names = violations(statement["kind"], statement["text"])
        if names:
            found.append((", ".join(names), statement["text"]))
    return found
