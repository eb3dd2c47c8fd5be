"""gluon verify's two checksum forms on one table of every type the digest form takes
(issue 31 item 6): one MD5 a bucket over its rows' texts in key order (PostgreSQL's
``STRING_AGG``, the lake's base table read in this process: gluon.lake.verify_digest) and
one MD5 a row summed (both engines' SQL). Each form's checksums must agree bucket by bucket
on an equal table, and a row changed on one side only must be found on each form. Real
PostgreSQL, Sail and Delta."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from deltalake import DeltaTable
from support.incremental import Source, enable, extract
from typer.testing import Result

from gluon.config import Settings, load_settings
from gluon.lake import verify_digest
from gluon.repo import OffloadedTable, Repository
from gluon.verify.bisect import Side
from gluon.verify.buckets import residue_key
from gluon.verify.checksums import Meter, SourceSide, lake_side
from gluon.verify.local_side import column_kinds, digest_form, local_lake_side
from gluon.verify.pace import Pace
from gluon.verify.sides import Shape

KEYS = [-(2**63), 2**63 - 1, -1, 0, *range(1, 400)]
COLUMNS = (
    "id BIGINT NOT NULL PRIMARY KEY, small SMALLINT, num INTEGER, note VARCHAR(40), "
    "doc TEXT, amount NUMERIC(10,2), fine NUMERIC(12,6), flag BOOLEAN, d DATE, "
    "ts TIMESTAMP, iv INTERVAL, u UUID"
)
NOTES = ["plain", "ünïcødé ✓", "", None, "a|b", "N", "5:x|", "two\nlines", "ß" * 40]
STAMPS = [
    "0001-01-01 00:00:00",
    "9999-12-31 23:59:59.999999",
    "2000-02-29 12:00:00.5",
    "1969-12-31 23:59:59.5",
    "2024-01-01 00:00:01.000100",
    None,
]


def _row(i: int, key: int) -> dict[str, object]:
    return {
        "id": key,
        "small": [-32768, 32767, None, 7][i % 4],
        "num": [-(2**31), 2**31 - 1, 0, None][i % 4],
        "note": NOTES[i % len(NOTES)],
        "doc": f"row {key} " * (i % 5),
        "amount": ["-0.01", "12345678.90", "0.10", "0", None][i % 5],
        "fine": ["0.000001", "-123456.000001", "0.100000", None][i % 4],
        "flag": [True, False, None][i % 3],
        "d": ["0001-01-01", "9999-12-31", "2000-02-29", None][i % 4],
        "ts": STAMPS[i % len(STAMPS)],
        "iv": ["1 mon", "-1 year 2 mons -3 days 04:05:06.789", None][i % 3],
        "u": ["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", None][i % 2],
    }


def _create(source: Source) -> None:
    names = list(_row(0, 0))
    with source.engine.begin() as db:
        db.execute(sa.text(f"CREATE TABLE {source.table} ({COLUMNS})"))
        db.execute(
            sa.text(
                f"INSERT INTO {source.table} ({', '.join(names)}) VALUES "
                f"({', '.join(':' + name for name in names)})"
            ),
            [_row(i, key) for i, key in enumerate(KEYS)],
        )


def _record(source: Source) -> tuple[Settings, Repository, OffloadedTable]:
    settings = load_settings()
    repo = Repository(settings.repo_url)
    record = repo.get_table(source.table.upper())
    assert record is not None
    return settings, repo, record


def _checksums(
    settings: Settings, repo: Repository, record: OffloadedTable, digests: bool
) -> list[tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]]]]:
    """Both sides' checksums in one form: the whole table in 256 buckets, then 3 of them
    split into 4,096 (a later level's query), source first."""
    shape = Shape.of(record, ["id"])
    kinds = column_kinds(shape)
    assert residue_key(shape.columns, kinds, shape.key_positions)
    meter = Meter()
    source = SourceSide.open(
        settings, repo, record, kinds, shape.key_positions, Pace(None), meter, True
    )
    source.digests = digests
    with ExitStack() as stack:
        engine = lake_side(settings, repo, record, kinds, shape.key_positions, meter, True)
        lake: Side = (
            stack.enter_context(local_lake_side(record, kinds, 0, meter, lambda: engine))
            if digests
            else stack.enter_context(engine)
        )
        levels = []
        for digits, parent_digits, parents in ((2, 0, []), (3, 2, ["00", "f0", "1f"])):
            levels.append(
                (
                    source.buckets(digits, parent_digits, parents),
                    lake.buckets(digits, parent_digits, parents),
                )
            )
    return levels


def _verify(run_cli: Callable[..., Result], source: Source) -> tuple[int, dict[str, Any]]:
    result = run_cli("gluon", "verify", "-t", source.table, "--json")
    assert result.exit_code in (0, 1), result.stdout + result.stderr
    [verdict] = json.loads(result.stdout)
    return result.exit_code, verdict


@pytest.fixture
def pg_source(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Source:
    from support.incremental import postgres_source

    source = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    _create(source)
    return source


@pytest.mark.parametrize("mode", ["DEFERRED", "IMMEDIATE"])
def test_both_forms_agree_bucket_by_bucket_on_an_equal_table_of_every_type(
    pg_source: Source,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    enable(run_cli, pg_source, "CHANGELOG", f"--incremental-merge-mode={mode}")
    extract(run_cli, pg_source)
    settings, repo, record = _record(pg_source)
    shape = Shape.of(record, ["id"])
    assert digest_form(settings, repo, record, column_kinds(shape), True)  # not a fallback

    for digests in (True, False):
        for source_level, lake_level in _checksums(settings, repo, record, digests):
            assert source_level, "no bucket at all: nothing was compared"
            assert source_level == lake_level, f"digests={digests}"
    # The two forms are not one computation under two names.
    by_digest = _checksums(settings, repo, record, True)[0][0]
    by_row = _checksums(settings, repo, record, False)[0][0]
    assert by_digest.keys() == by_row.keys() and by_digest != by_row

    code, verdict = _verify(run_cli, pg_source)
    assert (code, verdict["rows_compared"]) == (0, len(KEYS))
    assert verdict["bytes_moved"] < 20_000  # checksum rows only, no row read whole

    # A table larger than this process may hold in memory is checksummed by the engine.
    monkeypatch.setattr(verify_digest, "MAX_ROWS", len(KEYS) - 1)
    assert not digest_form(settings, repo, record, column_kinds(shape), True)


def test_rows_changed_on_one_side_are_found_on_each_form(
    pg_source: Source, run_cli: Callable[..., Result]
) -> None:
    enable(run_cli, pg_source, "CHANGELOG", "--incremental-merge-mode=DEFERRED")
    extract(run_cli, pg_source)
    settings, repo, record = _record(pg_source)
    base = DeltaTable(record.base_path)
    base.update(updates={"ts": "CAST('2000-02-29 12:00:00.6' AS TIMESTAMP)"}, predicate="id = 2")
    base.update(updates={"note": "'ünïcødé ✗'"}, predicate="id = 3")
    base.delete(f"id = {2**63 - 1}")
    with pg_source.engine.begin() as db:  # the capture bypassed: a change in the source only
        db.execute(sa.text("SET LOCAL session_replication_role = replica"))
        db.execute(sa.text(f"UPDATE {pg_source.table} SET amount = 0.11 WHERE id = -1"))
    expected = {
        "missing_in_lake": [[2**63 - 1]],
        "extra_in_lake": [],
        "different_values": [[-1], [2], [3]],
    }
    shape = Shape.of(record, ["id"])
    assert digest_form(settings, repo, record, column_kinds(shape), True)
    code, verdict = _verify(run_cli, pg_source)
    assert code == 1
    assert {kind: sorted(verdict[kind]) for kind in expected} == expected

    # A change pending in the delta table: the view merges, so the per-row form is used.
    with pg_source.engine.begin() as db:
        db.execute(sa.text(f"UPDATE {pg_source.table} SET doc = 'pending' WHERE id = 100"))
    extract(run_cli, pg_source)
    assert not digest_form(settings, repo, record, column_kinds(shape), True)
    code, verdict = _verify(run_cli, pg_source)
    assert code == 1
    assert {kind: sorted(verdict[kind]) for kind in expected} == expected


def test_a_base_data_file_gone_is_one_line_on_the_digest_form(
    pg_source: Source, run_cli: Callable[..., Result]
) -> None:
    enable(run_cli, pg_source, "CHANGELOG", "--incremental-merge-mode=IMMEDIATE")
    settings, repo, record = _record(pg_source)
    assert digest_form(settings, repo, record, column_kinds(Shape.of(record, ["id"])), True)
    [uri] = DeltaTable(record.base_path).file_uris()[:1]
    gone = Path(uri.removeprefix("file://"))
    gone.unlink()
    result = run_cli("gluon", "verify", "-t", pg_source.table, "--json")
    assert result.exit_code != 0
    assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
    assert f"names 1 data file that is gone ({gone.name})" in result.stdout + result.stderr
