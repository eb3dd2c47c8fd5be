"""A verdict as one line per table, or as JSON for scripts."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from gluon.verify.canonical import Canonical
from gluon.verify.compare import FIRST_KEYS
from gluon.verify.run import Verdict

KINDS = (
    ("missing_in_lake", "missing in the lake"),
    ("extra_in_lake", "extra in the lake"),
    ("different_values", "different values"),
)


def _value_text(value: object) -> str:
    """A key value as the line shows it: text that would print like other text (empty, a
    space at either end, a character not in Unicode's composed form NFC, one that does not
    print) is quoted with escapes, so a key missing in the lake and its look-alike extra one
    differ."""
    if isinstance(value, str) and (
        not value
        or value != value.strip()
        or unicodedata.normalize("NFC", value) != value
        or not value.isprintable()
    ):
        return ascii(value)
    return str(value)


def _key_text(key: Canonical) -> str:
    texts = [_value_text(value) for value in key]
    return texts[0] if len(key) == 1 else "(" + ", ".join(texts) + ")"


def line(verdict: Verdict) -> str:
    found = verdict.differences
    moving = (
        f" ({verdict.in_flight} keys a writer changed at every look were not settled)"
        if verdict.in_flight
        else ""
    )
    if verdict.locked is not None:
        return f"{verdict.table}: not verified: {verdict.locked}"
    if verdict.failed is not None:
        return f"{verdict.table}: not verified: {verdict.failed}"
    if verdict.lake_only:
        first = ", ".join(_key_text(key) for key in verdict.lake_only[:FIRST_KEYS])
        more = ", ..." if len(verdict.lake_only) > FIRST_KEYS else ""
        moving = (
            f"; {len(verdict.lake_only)} rows only in the lake, as the method "
            f"{verdict.method} allows (keys {first}{more}){moving}"
        )
    if verdict.equal:
        return f"{verdict.table}: equal, {verdict.rows_compared} rows compared{moving}"
    parts = []
    for attribute, label in KINDS:
        keys: list[Canonical] = getattr(found, attribute)
        if keys:
            first = ", ".join(_key_text(key) for key in keys[:FIRST_KEYS])
            more = ", ..." if len(keys) > FIRST_KEYS else ""
            parts.append(f"{len(keys)} {label} (keys {first}{more})")
    return (
        f"{verdict.table}: {found.count} differences in {verdict.rows_compared} rows "
        f"compared: " + "; ".join(parts) + moving
    )


def _json_key(key: Canonical) -> list[Any]:
    return [value if isinstance(value, int | float | str | None) else str(value) for value in key]


def as_json(verdicts: list[Verdict]) -> str:
    return json.dumps(
        [
            {
                "table": verdict.table,
                "equal": verdict.equal,
                "rows_compared": verdict.rows_compared,
                "looks": verdict.looks,
                "bytes_moved": verdict.bytes_moved,
                "buckets_compared": verdict.buckets_compared,
                "in_flight": verdict.in_flight,
                "resumed_levels": verdict.resumed_levels,
                "locked": verdict.locked,
                "failed": verdict.failed,
                "lake_only": [_json_key(key) for key in verdict.lake_only],
                **{
                    attribute: [_json_key(key) for key in getattr(verdict.differences, attribute)]
                    for attribute, _ in KINDS
                },
            }
            for verdict in verdicts
        ],
        indent=2,
    )
