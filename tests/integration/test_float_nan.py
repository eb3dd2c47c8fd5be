"""A float NaN reads back as NaN through every reader, after extraction and compaction.

A Delta file whose float column holds NaN and one other value is logged with min = max
(statistics leave NaN out); the engine once took such statistics for the whole column, so
the user view, queries and compaction read every NaN as that value, and a compaction
wrote it into the base for everyone (gluon/lake/float_stats.py). Here both readers are
checked at every step in both merge modes: the user view through gluon's engine session
and the base table through deltalake.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.shape_matrix import CaseRun, RunCli
from support.shapes import Case, float_nan_shapes, rounds_for

PLAIN, KEYWORDS = float_nan_shapes()
CASES = [
    Case(PLAIN, "CHANGELOG", "DEFERRED"),
    Case(PLAIN, "PG_LOGICAL", "IMMEDIATE"),
    Case(KEYWORDS, "CHANGELOG", "IMMEDIATE"),
    Case(KEYWORDS, "PG_LOGICAL", "DEFERRED"),
]


class EveryReader(CaseRun):
    """The shape matrix's run, reading the user view (the engine) and the base table
    (deltalake) after every step, IMMEDIATE included."""

    def run(self) -> None:
        shape, case = self.shape, self.case
        self.db.run(shape.create())
        self.offload(
            "--incremental-updates-enabled",
            f"--incremental-extraction-method={case.method}",
            f"--incremental-merge-mode={case.mode}",
        )
        self.check("after enable", view=True, base=True)
        for round_ in rounds_for(shape, case.method):
            for transaction in round_.transactions(shape):
                self.db.run(transaction)
            self.offload("--incremental-run-extraction")
            self.check(f"after {round_.name}", view=True, base=case.mode == "IMMEDIATE")
        self.offload("--incremental-run-compaction", "--incremental-wait-time=0")
        self.check("after compaction", view=True, base=True)


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id) for case in CASES])
def test_float_nan_reads_back_as_nan(
    case: Case, pg_url: str, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    EveryReader(case, pg_url, run_cli).run()
