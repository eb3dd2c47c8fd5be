"""The IMMEDIATE sync's Arrow work and the PostgreSQL read module import neither pandas nor
Polars (0.3-0.7 s of a command's start-up; issue 28). Run in a fresh interpreter: the test
process has both loaded already."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import pyarrow as pa
import gluon.source.adbc
from gluon.capture.changelog import sequence_runs
from gluon.lake.merge import after_truncate, latest_per_key
from gluon.schema import arrow_int_scalar, arrow_repeat, arrow_string_scalar

ids = arrow_repeat(arrow_int_scalar(7), 3)
changes = pa.Table.from_arrays(
    [ids, pa.Array.from_buffers(pa.int64(), 3, [None, pa.py_buffer(bytes(range(24)))]),
     arrow_repeat(arrow_string_scalar("U"), 3)],
    names=["id", "gl_seq", "gl_op"],
)
applied = after_truncate(changes, latest_per_key(changes, ["id"]))
runs = sequence_runs(changes.column("gl_seq"))
assert applied.to_pylist().count(True) == 1, applied
assert len(runs) == 3, runs
print(sorted(name for name in ("pandas", "polars", "pyarrow.dataset") if name in sys.modules))
"""


def test_immediate_arrow_work_imports_no_pandas_polars_or_dataset() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


PG_LOGICAL_PROBE = """
import sys
import pyarrow as pa
from gluon.capture import objects
from gluon.schema import Column, TableSpec
from gluon.source.logical_values import PrintedChanges

columns = (Column("id", "integer", "int", False), Column("note", "text", "string"))
spec = TableSpec("s", "t", columns)
changes = PrintedChanges()
changes.extend([("INSERT", "1", "'it''s'"), ("DELETE", "2", None)], [10, 11], ["I", "D"])
typed = changes.as_arrow(spec, pa.schema([*spec.arrow_schema, *objects.change_fields()]))
assert typed.column("note").to_pylist() == ["it's", None], typed
print(sorted(name for name in ("pandas", "polars") if name in sys.modules))
"""


def test_pg_logical_batch_typing_imports_no_pandas() -> None:
    """A PG_LOGICAL batch becomes Arrow without pyarrow loading pandas (a second of a
    100k-change extraction's child; issue 33)."""
    out = subprocess.run(
        [sys.executable, "-c", PG_LOGICAL_PROBE], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


SHARED_EMPTY_READ_PROBE = """
import sys
from gluon.extract.feeds.shared_reader import SharedSlotReader
from gluon.schema import Column, TableSpec

columns = (Column("id", "integer", "int", False), Column("note", "text", "string"))
spec = TableSpec("s", "t", columns)
# The stream of this extraction ended (a horizon, no stream): the closing read, which every
# extraction makes, answers without the source.
reader = SharedSlotReader(None, None, "s.t", spec, ("id",))  # type: ignore[arg-type]
reader._horizon = 1
empty = reader.read(100_000)
assert empty.num_rows == 0 and empty.column_names[-2:] == ["gl_seq", "gl_op"], empty
print(sorted(name for name in ("pandas", "polars") if name in sys.modules))
"""


def test_the_shared_slot_s_closing_empty_read_imports_no_pandas() -> None:
    """The read that ends a shared-slot extraction returns an empty table without pyarrow
    importing pandas (``Schema.empty_table`` does: 0.5 s of a 100k-change extraction in
    py-spy, issue 33 item 2)."""
    out = subprocess.run(
        [sys.executable, "-c", SHARED_EMPTY_READ_PROBE], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
