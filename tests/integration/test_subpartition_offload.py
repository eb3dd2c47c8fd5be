"""Subpartition-based offload of a PostgreSQL two-level partitioned table (issue 32).

``sh.sales`` is RANGE partitioned by month on ``sold_on``; January to March are LIST
subpartitioned on another column (``region``), April HASH subpartitioned on ``sale_id``.
Real PostgreSQL, the real CLI, embedded Sail and Delta.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from support.incremental import RunCli, lake_rows, run_offload_process
from typer.testing import Result

from gluon.config import load_settings
from gluon.lake.storage import delta_version
from gluon.methods.base import SourceObject
from gluon.repo import Repository

REGIONS = ("EMEA", "APAC", "AMER")
Row = tuple[int, str, str, str]


def _sales(url: str) -> sa.Engine:
    engine = sa.create_engine(url)
    with engine.begin() as db:
        db.execute(sa.text("CREATE SCHEMA sh"))
        db.execute(
            sa.text(
                "CREATE TABLE sh.sales (sale_id INTEGER, sold_on DATE NOT NULL, "
                "region TEXT NOT NULL, amount NUMERIC(10,2), "
                "PRIMARY KEY (sale_id, sold_on, region)) PARTITION BY RANGE (sold_on)"
            )
        )
        for month in range(1, 4):
            part = f"sh.sales_2017_{month:02d}"
            db.execute(
                sa.text(
                    f"CREATE TABLE {part} PARTITION OF sh.sales FOR VALUES FROM "
                    f"('{dt.date(2017, month, 1)}') TO ('{dt.date(2017, month + 1, 1)}') "
                    "PARTITION BY LIST (region)"
                )
            )
            for region in REGIONS:
                db.execute(
                    sa.text(
                        f"CREATE TABLE {part}_{region.lower()} PARTITION OF {part} "
                        f"FOR VALUES IN ('{region}')"
                    )
                )
        db.execute(
            sa.text(
                "CREATE TABLE sh.sales_2017_04 PARTITION OF sh.sales FOR VALUES FROM "
                "('2017-04-01') TO ('2017-05-01') PARTITION BY HASH (sale_id)"
            )
        )
        for remainder in range(2):
            db.execute(
                sa.text(
                    f"CREATE TABLE sh.sales_2017_04_h{remainder} PARTITION OF sh.sales_2017_04 "
                    f"FOR VALUES WITH (MODULUS 2, REMAINDER {remainder})"
                )
            )
        db.execute(
            sa.text(
                "INSERT INTO sh.sales SELECT g, DATE '2017-01-01' + (g % 120), "
                "(ARRAY['EMEA','APAC','AMER'])[1 + g % 3], g * 1.25 "
                "FROM generate_series(1, 480) g"
            )
        )
    return engine


def source_rows(engine: sa.Engine, where: str) -> list[Row]:
    with engine.connect() as db:
        rows = db.execute(
            sa.text(f"SELECT sale_id, sold_on, region, amount FROM sh.sales WHERE {where}")
        )
        return sorted((r[0], str(r[1]), r[2], str(r[3])) for r in rows)


def lake(table: str = "sh.sales") -> list[Row]:
    rows = lake_rows(f"SELECT sale_id, sold_on, region, amount FROM {table}")
    return sorted(
        (int(str(r["sale_id"])), str(r["sold_on"]), str(r["region"]), str(r["amount"]))
        for r in rows
    )


def in_subpartitions(*parts: tuple[int, str]) -> str:
    """SQL for the rows of (month, region) subpartitions."""
    return " OR ".join(
        f"(EXTRACT(MONTH FROM sold_on) = {month} AND region = '{region}')"
        for month, region in parts
    )


def assert_refused(result: Result, exit_code: int, fragment: str) -> None:
    assert result.exit_code == exit_code, result.stderr
    assert len(error_lines(result)) == 1, result.stderr
    assert fragment in result.stderr, result.stderr


@pytest.fixture
def sales(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> sa.Engine:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    return _sales(pg_url)


def test_bad_subpartition_selections_change_nothing(
    sales: sa.Engine, run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def offload(*options: str) -> Result:
        return run_cli("offload", "-t", "sh.sales", "-x", *options)

    assert_refused(
        offload("--subpartition-names=sales_2017_01_nowhere"),
        2,
        "--subpartition-names: sh.sales has no subpartition sales_2017_01_nowhere (subpartitions:",
    )
    assert_refused(
        offload("--subpartition-names=sales_2017_01"),
        2,
        "sales_2017_01 of sh.sales is a partition, not subpartitions: name them with "
        "--partition-names",
    )
    assert_refused(
        offload("--partition-names=sales_2017_02", "--subpartition-names=sales_2017_01_emea"),
        2,
        "use only one of --partition-names, --subpartition-names in one offload",
    )
    assert_refused(
        offload("--subpartition-names=sales_2017_04_h0"),
        2,
        "sales_2017_04_h0 is a HASH subpartition: no value bound tells its rows from its "
        "siblings' in the lake, so it is offloaded only with all of them (sales_2017_04_h0, "
        "sales_2017_04_h1), or as its partition with --partition-names=sales_2017_04",
    )
    with sales.begin() as db:
        db.execute(sa.text("CREATE TABLE sh.plain (id INTEGER PRIMARY KEY)"))
        db.execute(sa.text("CREATE TABLE sh.flat (id INTEGER PRIMARY KEY) PARTITION BY RANGE (id)"))
        db.execute(
            sa.text("CREATE TABLE sh.flat_low PARTITION OF sh.flat FOR VALUES FROM (0) TO (10)")
        )
    for table in ("sh.plain", "sh.flat"):
        assert_refused(
            run_cli("offload", "-t", table, "-x", "--subpartition-names=flat_low"),
            2,
            f"--subpartition-names: {table} has no subpartitions: offload its partitions with "
            "--partition-names, or its rows with --offload-predicate",
        )
    # A dialect without native partitions: its tables have no subpartitions either.
    sqlite_url = f"sqlite:///{tmp_path / 'app.db'}"
    with sa.create_engine(sqlite_url).begin() as db:
        db.execute(sa.text("CREATE TABLE items (id INTEGER PRIMARY KEY)"))
    monkeypatch.setenv("GLUON_SOURCE_URL", sqlite_url)
    assert_refused(
        run_cli("offload", "-t", "main.items", "-x", "--subpartition-names=p1"),
        2,
        "--subpartition-names: main.items has no subpartitions",
    )
    # Nothing changed: no table was recorded, no lake table written.
    repo = Repository(load_settings().repo_url, create=True)
    assert repo.get_table("SH.SALES") is None and repo.get_table("SH.PLAIN") is None
    assert not list((Path(load_settings().lake_root)).glob("**/_delta_log"))


def test_subpartitions_offloaded_in_steps_exactly_once(sales: sa.Engine, run_cli: RunCli) -> None:
    first = run_cli(
        "offload", "-t", "sh.sales", "-x",
        "--subpartition-names=sales_2017_01_emea,SALES_2017_02_EMEA",
    )  # fmt: skip
    assert first.exit_code == 0, first.stderr
    assert lake() == source_rows(sales, in_subpartitions((1, "EMEA"), (2, "EMEA")))

    # Offloaded already (whole, or inside a named partition): refused, the lake unchanged.
    path = Repository(load_settings().repo_url).get_table("SH.SALES").base_path  # type: ignore[union-attr]
    version = delta_version(path)
    again = run_cli("offload", "-t", "sh.sales", "-x", "--subpartition-names=sales_2017_02_emea")
    assert again.exit_code == 1 and "overlap data already offloaded" in again.stderr
    whole = run_cli("offload", "-t", "sh.sales", "-x", "--partition-names=sales_2017_01")
    assert whole.exit_code == 1 and "overlap data already offloaded" in whole.stderr
    assert delta_version(path) == version

    # A crash after the first Delta commit of the next increment, then the re-run: once.
    died = run_offload_process(
        "-t", "sh.sales", "-x", "--subpartition-names=sales_2017_01_apac",
        env={"GLUON_FAULT": "repo.before_finish_increment"},
    )  # fmt: skip
    assert died.returncode == 137, died.stderr
    rerun = run_cli("offload", "-t", "sh.sales", "-x", "--subpartition-names=sales_2017_01_apac")
    assert rerun.exit_code == 0, rerun.stderr
    done = ((1, "EMEA"), (2, "EMEA"), (1, "APAC"))
    assert lake() == source_rows(sales, in_subpartitions(*done))

    # A subpartition dropped from the source after its offload stays in the lake.
    kept = lake()
    with sales.begin() as db:
        db.execute(sa.text("DROP TABLE sh.sales_2017_01_emea"))
    assert lake() == kept

    # HASH subpartitions go together: all of April's, as one increment (its first try
    # killed after its Delta commit: the re-run replaces those rows, never doubles them).
    died = run_offload_process(
        "-t", "sh.sales", "-x", "--subpartition-names=sales_2017_04_h1,sales_2017_04_h0",
        env={"GLUON_FAULT": "lake.after_write"},
    )  # fmt: skip
    assert died.returncode == 137, died.stderr
    hashed = run_cli(
        "offload", "-t", "sh.sales", "-x", "--subpartition-names=sales_2017_04_h1,sales_2017_04_h0"
    )
    assert hashed.exit_code == 0, hashed.stderr
    assert lake() == sorted([*kept, *source_rows(sales, "EXTRACT(MONTH FROM sold_on) = 4")])

    # Status and the report name the offloaded subpartitions, in every format.
    names = ["sales_2017_01_emea", "sales_2017_02_emea", "sales_2017_01_apac"]
    names += ["sales_2017_04_h1", "sales_2017_04_h0"]
    status = run_cli("display_incremental_status", "-t", "sh.sales")
    assert status.exit_code == 0, status.stderr
    assert re.search(r"\nOffloaded subpartitions: +" + ", ".join(names) + "\n", status.stdout)
    as_json = run_cli("display_incremental_status", "-t", "sh.sales", "--json")
    assert json.loads(as_json.stdout)["offload"]["offloaded_subpartitions"] == names
    out = Path(load_settings().offload_home) / "reports"
    for output_format in ("text", "json", "html"):
        report = run_cli(
            "offload_status_report", "--output-level=detail",
            f"--output-format={output_format}", f"--output-dir={out / output_format}",
        )  # fmt: skip
        assert report.exit_code == 0, report.stderr
        (saved,) = (out / output_format).iterdir()
        if output_format == "json":
            (table,) = json.loads(saved.read_text())["tables"]
            assert table["status"]["offload"]["offloaded_subpartitions"] == names
        else:
            assert ", ".join(names) in saved.read_text(), output_format


def _updatable_view(table_key: str) -> str:
    state = Repository(load_settings().repo_url).incremental.get_state(table_key)
    assert state is not None
    view = next(o for o in state.source_objects if o.kind == SourceObject.UPDATABLE_VIEW.value)
    return f'"{view.schema}"."{view.name}"'


def test_updatable_changelog_keeps_offloaded_subpartitions_in_step(
    sales: sa.Engine, run_cli: RunCli
) -> None:
    """Table 3, offload type FULL (100/10): any method; UPDATABLE_CHANGELOG captures the
    application's DML on the offloaded subpartitions and the view's patches."""
    offloaded = [(1, "EMEA"), (1, "APAC")]
    first = run_cli(
        "offload", "-t", "sh.sales", "-x", "--offload-type=FULL",
        "--subpartition-names=sales_2017_01_emea,sales_2017_01_apac",
    )  # fmt: skip
    assert first.exit_code == 0, first.stderr
    enabled = run_cli(
        "offload", "-t", "sh.sales", "-x", "--incremental-updates-enabled",
        "--incremental-extraction-method=UPDATABLE_CHANGELOG",
    )  # fmt: skip
    assert enabled.exit_code == 0, enabled.stderr
    with sales.begin() as db:  # the application changes offloaded rows only
        db.execute(
            sa.text(
                "UPDATE sh.sales SET amount = amount * 2 WHERE region = 'EMEA' "
                "AND sold_on < DATE '2017-01-10'"
            )
        )
        db.execute(
            sa.text("DELETE FROM sh.sales WHERE region = 'APAC' AND sold_on < DATE '2017-01-05'")
        )
        db.execute(sa.text("INSERT INTO sh.sales VALUES (9001, DATE '2017-01-15', 'EMEA', 12.34)"))
    # The next subpartition is offloaded before anything changes it, then joins in.
    offloaded.append((2, "AMER"))
    more = run_cli("offload", "-t", "sh.sales", "-x", "--subpartition-names=sales_2017_02_amer")
    assert more.exit_code == 0, more.stderr
    with sales.begin() as db:
        db.execute(sa.text("UPDATE sh.sales SET amount = NULL WHERE sale_id = 32"))
    extracted = run_cli("offload", "-t", "sh.sales", "-x", "--incremental-run-extraction")
    assert extracted.exit_code == 0, extracted.stderr
    assert lake() == source_rows(sales, in_subpartitions(*offloaded))
    compacted = run_cli(
        "offload",
        "-t",
        "sh.sales",
        "-x",
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
    )
    assert compacted.exit_code == 0, compacted.stderr
    assert lake() == source_rows(sales, in_subpartitions(*offloaded))
    assert lake_rows("SELECT COUNT(*) AS n FROM sh_load.sales_changes")[0]["n"] == 0
    # Changed before its offload (the spec's warning): the captured change reached the lake,
    # so offloading that subpartition now would hide it; refused, the lake unchanged.
    with sales.begin() as db:
        db.execute(sa.text("UPDATE sh.sales SET amount = 1 WHERE sale_id = 60"))  # March EMEA
    extracted = run_cli("offload", "-t", "sh.sales", "-x", "--incremental-run-extraction")
    assert extracted.exit_code == 0, extracted.stderr
    before = lake()
    early = run_cli("offload", "-t", "sh.sales", "-x", "--subpartition-names=sales_2017_03_emea")
    assert_refused(early, 1, "1 captured changes touch rows of")
    assert lake() == before


def test_updatable_insert_adds_rows_to_an_incremental_subpartition_offload(
    sales: sa.Engine, run_cli: RunCli
) -> None:
    """Table 3, offload type INCREMENTAL (90/10): UPDATABLE_INSERT adds missing rows to an
    offloaded subpartition through the updatable view, the application table untouched."""
    plan = run_cli("offload", "-t", "sh.sales", "--subpartition-names=sales_2017_03_amer")
    assert plan.exit_code == 0, plan.stderr
    assert "copy subpartitions sales_2017_03_amer (the rows matching '((column(sold_on) >= " in (
        " ".join(plan.stdout.split())
    )
    first = run_cli("offload", "-t", "sh.sales", "-x", "--subpartition-names=sales_2017_03_amer")
    assert first.exit_code == 0, first.stderr
    enabled = run_cli(
        "offload", "-t", "sh.sales", "-x", "--incremental-updates-enabled",
        "--incremental-extraction-method=UPDATABLE_INSERT",
    )  # fmt: skip
    assert enabled.exit_code == 0, enabled.stderr
    before = source_rows(sales, in_subpartitions((3, "AMER")))
    with sales.begin() as db:
        db.execute(
            sa.text(
                f"INSERT INTO {_updatable_view('SH.SALES')} (sale_id, sold_on, region, amount) "
                "VALUES (9002, DATE '2017-03-20', 'AMER', 7.50)"
            )
        )
    assert source_rows(sales, in_subpartitions((3, "AMER"))) == before
    extracted = run_cli("offload", "-t", "sh.sales", "-x", "--incremental-run-extraction")
    assert extracted.exit_code == 0, extracted.stderr
    expected = sorted([*before, (9002, "2017-03-20", "AMER", "7.50")])
    assert lake() == expected
    compacted = run_cli(
        "offload",
        "-t",
        "sh.sales",
        "-x",
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
    )
    assert compacted.exit_code == 0, compacted.stderr
    assert lake() == expected


def test_a_list_partition_holding_null_offloads_its_null_rows(
    sales: sa.Engine, run_cli: RunCli
) -> None:
    """``FOR VALUES IN (NULL, 'EU')``: the NULL-key rows belong to the partition (they were
    left out, and the NULL read as the string 'NULL')."""
    with sales.begin() as db:
        db.execute(
            sa.text("CREATE TABLE sh.visits (id INTEGER, region TEXT) PARTITION BY LIST (region)")
        )
        db.execute(
            sa.text("CREATE TABLE sh.visits_eu PARTITION OF sh.visits FOR VALUES IN (NULL, 'EU')")
        )
        db.execute(sa.text("CREATE TABLE sh.visits_us PARTITION OF sh.visits FOR VALUES IN ('US')"))
        db.execute(
            sa.text("INSERT INTO sh.visits VALUES (1, 'EU'), (2, NULL), (3, 'US'), (4, NULL)")
        )
    result = run_cli("offload", "-t", "sh.visits", "-x", "--partition-names=visits_eu")
    assert result.exit_code == 0, result.stderr
    rows = lake_rows("SELECT id, region FROM sh.visits")
    assert sorted((int(str(r["id"])), r["region"]) for r in rows) == [
        (1, "EU"),
        (2, None),
        (4, None),
    ]
