"""TRUNCATE changes (``gl_op`` 'T', every table column NULL) in the delta views' SELECTs
(``templates/lake/merge_view.sql.j2``, ``union_all_view.sql.j2``) on the real engine.

The shared contract: a 'T' means every row as of just before its ``gl_seq`` is gone (base
rows and earlier changes); later changes apply on top of an empty table. Expected rows are
computed here by replaying the changes in order; keys include NULLs, which a 'T' (all
NULL) must never match as a key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gluon.config import load_settings
from gluon.lake import sql
from gluon.lake.session import LakeSession, open_session

COLUMNS = ["k1", "k2", "v"]
KEYS = ["k1", "k2"]
Row = tuple[Any, ...]

BASE: list[Row] = [(1, "a", "base 1a"), (2, None, "base 2-"), (3, "a", "base 3a")]
# (k1, k2, v, gl_seq, gl_op, gl_control_partition, gl_extraction_id)
BEFORE: list[Row] = [
    (1, "a", "1a before", 10, "U", 1, 1),
    (4, None, "4- before", 11, "I", 1, 1),
]
TRUNCATE: Row = (None, None, None, 12, "T", 1, 1)
AFTER: list[Row] = [
    (None, None, "all NULL after", 13, "I", 2, 2),  # the key a 'T' would match
    (1, "a", "1a after", 14, "I", 2, 2),
    (5, "b", "5b after", 15, "I", 2, 2),
    (5, "b", None, 16, "D", 2, 2),
    (6, "c", "6c after", 17, "I", 2, 2),
    (6, "c", "6c updated", 18, "U", 2, 2),
]


def _replay(base: list[Row], changes: list[Row], *, inserts_only: bool) -> list[Row]:
    """What the source holds after ``changes`` (in ``gl_seq`` order) on top of ``base``."""
    if inserts_only:
        rows = list(base)
        for change in sorted(changes, key=lambda c: c[3]):
            if change[4] == "T":
                rows = []
            elif change[4] == "I":
                rows.append(change[:3])
        return rows
    state = {row[:2]: row for row in base}
    for change in sorted(changes, key=lambda c: c[3]):
        if change[4] == "T":
            state = {}
        elif change[4] == "D":
            state.pop(change[:2], None)
        else:
            state[change[:2]] = change[:3]
    return list(state.values())


def _write(
    session: LakeSession, location: Path, rows: list[Row], schema: pa.Schema, *by: str
) -> str:
    table = pa.Table.from_pylist(
        [dict(zip(schema.names, row, strict=True)) for row in rows], schema
    )
    session.write(
        session.spark.createDataFrame(table), str(location), mode="overwrite", partition_by=by
    )
    return f"delta.`{location}`"


def _tables(session: LakeSession, folder: Path, changes: list[Row]) -> tuple[str, str]:
    columns = [pa.field("k1", pa.int64()), pa.field("k2", pa.string()), pa.field("v", pa.string())]
    base = _write(session, folder / "base", BASE, pa.schema(columns))
    change_columns = [
        pa.field("gl_seq", pa.int64()),
        pa.field("gl_op", pa.string()),
        pa.field("gl_control_partition", pa.int32()),
        pa.field("gl_extraction_id", pa.int64()),
    ]
    schema = pa.schema(columns + change_columns)
    delta = _write(session, folder / "delta", changes, schema, sql.CONTROL_PARTITION)
    return base, delta


def _shown(session: LakeSession, kind: str, base: str, delta: str, low: int) -> list[Row]:
    select = sql.merged_rows(
        kind,
        columns=COLUMNS,
        keys=KEYS,
        base=base,
        delta=delta,
        low=low,
        high=None,
        truncated=True,
    )
    return [tuple(row) for row in session.sql(select).collect()]


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Any:
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OFFLOAD_HOME", str(home))
        with open_session(load_settings()) as opened:
            yield opened


@pytest.mark.parametrize("kind", ["merge", "union_all"])
@pytest.mark.parametrize(
    ("case", "changes"),
    [
        ("truncate among the changes", [*BEFORE, TRUNCATE, *AFTER]),
        ("truncate last", [*BEFORE, *AFTER, (None, None, None, 19, "T", 2, 2)]),
        (
            "two truncates",
            [*BEFORE, TRUNCATE, *AFTER[:3], (None, None, None, 16, "T", 2, 2), *AFTER[4:]],
        ),
        ("no truncate (a rendered but unused check)", [*BEFORE, *AFTER]),
    ],
)
def test_a_truncate_hides_the_base_and_every_earlier_change(
    session: LakeSession, tmp_path: Path, kind: str, case: str, changes: list[Row]
) -> None:
    if kind == "union_all":
        changes = [c for c in changes if c[4] in ("I", "T")]
    base, delta = _tables(session, tmp_path, changes)
    shown = _shown(session, kind, base, delta, low=1)
    expected = _replay(BASE, changes, inserts_only=kind == "union_all")
    assert sorted(shown, key=repr) == sorted(expected, key=repr), case


@pytest.mark.parametrize("kind", ["merge", "union_all"])
def test_a_truncate_below_the_partitions_read_is_already_in_the_base(
    session: LakeSession, tmp_path: Path, kind: str
) -> None:
    """A compacted 'T' (control partition 1, the view reads from 2) hides nothing."""
    changes = [TRUNCATE, *(c for c in AFTER if kind == "merge" or c[4] == "I")]
    base, delta = _tables(session, tmp_path, changes)
    shown = _shown(session, kind, base, delta, low=2)
    expected = _replay(BASE, [c for c in changes if c[5] >= 2], inserts_only=kind == "union_all")
    assert sorted(shown, key=repr) == sorted(expected, key=repr)
