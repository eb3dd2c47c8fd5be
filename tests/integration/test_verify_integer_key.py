"""``gluon verify`` of a table keyed by one integer column: its buckets are the key's own
low hex digits (gluon.verify.buckets), so the edge values of a 64-bit key are tried here:
the smallest and largest, negative keys, keys that share their 15 low hex digits and a
crowd of negative keys that share 9, so the bisection needs many levels to part them
(real SQLite and PostgreSQL sources, Sail, the lake tampered with through deltalake)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from deltalake import DeltaTable
from support.incremental import Source, enable, extract
from typer.testing import Result

from gluon.config import load_settings
from gluon.repo import Repository
from gluon.verify.buckets import residue_key
from gluon.verify.checksums import text_kind

SMALLEST, LARGEST = -(2**63), 2**63 - 1
TWIN = 0x0123456789ABCDEF  # and TWIN + 7 * 16**15: the same 15 low hex digits
STRIDE = 16**9  # -j * STRIDE: 9 low hex digits of zeros, all in one bucket down to 9 digits
CROWD = 1500
DENSE = 1500
BROKEN_IN_CROWD = -777 * STRIDE


def _keys() -> list[int]:
    edges = [SMALLEST, LARGEST, -1, 0, TWIN, TWIN + 7 * 16**15, -TWIN]
    return edges + list(range(1, DENSE + 1)) + [-j * STRIDE for j in range(1, CROWD + 1)]


def _create(source: Source) -> None:
    with source.engine.begin() as db:
        db.execute(
            sa.text(
                f"CREATE TABLE {source.table} (id BIGINT NOT NULL PRIMARY KEY, "
                "name VARCHAR(40), amount NUMERIC(12,2))"
            )
        )
        db.execute(
            sa.text(f"INSERT INTO {source.table} (id, name, amount) VALUES (:id, :name, :amount)"),
            [{"id": key, "name": f"row {key}", "amount": key % 1000} for key in _keys()],
        )


@pytest.mark.parametrize("mode", ["DEFERRED", "IMMEDIATE"])
def test_bisection_by_integer_key_finds_exactly_the_broken_edge_keys(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    _create(source)
    enable(run_cli, source, "CHANGELOG", f"--incremental-merge-mode={mode}")
    extract(run_cli, source)
    record = Repository(load_settings().repo_url).get_table(source.table.upper())
    assert record is not None
    kinds = [text_kind(column, False) for column in record.columns]
    assert residue_key(record.columns, kinds, [0])  # this table is bucketed by its key

    equal = run_cli("gluon", "verify", "-t", source.table, "--json")
    assert equal.exit_code == 0, equal.stdout + equal.stderr
    [verdict] = json.loads(equal.stdout)
    assert (verdict["equal"], verdict["rows_compared"]) == (True, len(_keys()))

    DeltaTable(record.base_path).delete(f"id < {SMALLEST + 1}")
    for key in (LARGEST, -1, TWIN + 7 * 16**15, BROKEN_IN_CROWD):
        DeltaTable(record.base_path).update(updates={"name": "'tampered'"}, predicate=f"id = {key}")

    broken = run_cli("gluon", "verify", "-t", source.table, "--json")
    assert broken.exit_code == 1, broken.stdout + broken.stderr
    [verdict] = json.loads(broken.stdout)
    assert verdict["missing_in_lake"] == [[SMALLEST]]
    assert verdict["extra_in_lake"] == []
    assert sorted(verdict["different_values"]) == sorted(
        [[LARGEST], [-1], [TWIN + 7 * 16**15], [BROKEN_IN_CROWD]]
    )
