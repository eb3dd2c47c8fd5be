"""Status, the report (text, JSON, CSV, HTML) and the service's metrics agree with each other
and with the merge mode, for every PostgreSQL extraction method in both merge modes (issue 30).

One PostgreSQL source holds a table per method x merge mode. Every table gets the same kind
of changes; the service (in this process, with its real metrics registry) extracts them, then
compacts. Afterwards every surface must tell the same story: the same count of changes
shipped (the changes taken from the source), the same run ids (the repository's, labelled
``extraction run N`` / ``compaction run N``), the same last compaction, and nothing that
contradicts the merge mode (IMMEDIATE: no views, no control partitions, no delta backlog).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support.cli import GLUON_SETTINGS, run_cli
from support.incremental import methods_for, run_offload_process
from support.tables import App, ok

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.methods import registered_methods
from gluon.methods.base import SourceObject, ViewKind
from gluon.repo import Repository
from gluon.service.config import load_config
from gluon.service.metrics import ServiceMetrics
from gluon.service.runner import Service

MODES = ("DEFERRED", "IMMEDIATE")
METHODS = methods_for("postgresql")
LIMIT_SECONDS = 600.0


@dataclass(frozen=True)
class Table:
    method: str
    mode: str

    @property
    def name(self) -> str:
        return f"{self.method.lower()}_{self.mode[:3].lower()}"

    @property
    def key(self) -> str:
        return f"APP.{self.name.upper()}"

    @property
    def insert_only(self) -> bool:
        return registered_methods()[self.method].view_kind is ViewKind.UNION_ALL

    @property
    def changes(self) -> int:
        """The changes each table gets before the service's extraction (``make_changes``)."""
        return 3 if self.insert_only else 5

    @property
    def late(self) -> int:
        """Changes made between the extraction and the compaction: a DEFERRED compaction's
        own acknowledging extraction ships it (IMMEDIATE compactions extract nothing)."""
        return 1 if self.mode == "DEFERRED" else 0

    @property
    def shipped(self) -> int:
        return self.changes + self.late


TABLES = [Table(method, mode) for method in METHODS for mode in MODES]


@dataclass
class Home:
    path: Path
    metrics: ServiceMetrics
    log_lines: list[str]


def run_service(home: Path, body: list[str], metrics: ServiceMetrics, runs: int) -> list[str]:
    """Run the service until ``runs`` runs ended; return its run lines."""
    config_path = home / "conf" / "tables.toml"
    config_path.write_text("\n".join(["[service]", "parallel = 2", "", *body]))
    lines: list[str] = []
    service = Service(
        load_settings(),
        load_config(config_path),
        parallel=2,
        metrics=metrics,
        announce=lines.append,
    )
    stop = threading.Event()
    thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
    thread.start()
    give_up = time.monotonic() + LIMIT_SECONDS
    while service.totals.runs < runs:
        assert thread.is_alive() and time.monotonic() < give_up, lines
        time.sleep(0.5)
    stop.set()
    thread.join(timeout=LIMIT_SECONDS)
    return lines


def make_changes(engine: sa.Engine, table: Table, where: str) -> None:
    """Insert-only methods: 3 inserts. The others: 2 inserts, 2 updates of one of them (one
    key, so an IMMEDIATE merge writes fewer rows than it read), 1 delete."""
    with engine.begin() as db:
        db.execute(sa.text(f"INSERT INTO {where} VALUES (101, 'a', 1), (102, 'b', 2)"))
        if table.insert_only:
            db.execute(sa.text(f"INSERT INTO {where} VALUES (103, 'c', 3)"))
            return
        db.execute(sa.text(f"UPDATE {where} SET amount = 5 WHERE id = 101"))
        db.execute(sa.text(f"UPDATE {where} SET amount = 6 WHERE id = 101"))
        db.execute(sa.text(f"DELETE FROM {where} WHERE id = 1"))


def written_to(table: Table) -> str:
    """Where the application writes: the updatable view for the UPDATABLE family."""
    if not registered_methods()[table.method].has_object(SourceObject.UPDATABLE_VIEW):
        return f"app.{table.name}"
    state = Repository(load_settings().repo_url).incremental.get_state(table.key)
    assert state is not None
    view = next(o for o in state.source_objects if o.kind == SourceObject.UPDATABLE_VIEW.value)
    return f"{view.schema}.{view.name}"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, pg_server: Any) -> Iterator[Home]:
    root = tmp_path_factory.mktemp("agreement")
    url = pg_server.create_database("status_agreement")
    engine = sa.create_engine(url)
    with pytest.MonkeyPatch.context() as patch:
        for name in GLUON_SETTINGS:
            patch.delenv(name, raising=False)
        if os.environ.get("GLUON_TEST_SPARK_REMOTE"):
            patch.setenv("SPARK_REMOTE", os.environ["GLUON_TEST_SPARK_REMOTE"])
        patch.setenv("OFFLOAD_HOME", str(root / "offload_home"))
        patch.setenv("GLUON_SOURCE_URL", url)
        (root / "offload_home" / "conf").mkdir(parents=True)
        with engine.begin() as db:
            db.execute(sa.text("CREATE SCHEMA app"))
            for table in TABLES:
                db.execute(
                    sa.text(
                        f"CREATE TABLE app.{table.name} (id INTEGER PRIMARY KEY, "
                        "name VARCHAR(40), amount NUMERIC(12,2))"
                    )
                )
                db.execute(sa.text(f"INSERT INTO app.{table.name} VALUES (1, 'x', 1), (2, 'y', 2)"))
        for table in TABLES:
            ok(
                run_cli(
                    "offload",
                    "-t",
                    f"app.{table.name}",
                    "-x",
                    "--incremental-updates-enabled",
                    f"--incremental-extraction-method={table.method}",
                    f"--incremental-merge-mode={table.mode}",
                )
            )
            make_changes(engine, table, written_to(table))
        names = [f'[tables."app.{table.name}"]' for table in TABLES]
        metrics = ServiceMetrics()
        lines = run_service(
            root / "offload_home",
            ["[defaults]", 'extraction_interval = "1h"', "", *names],
            metrics,
            len(TABLES),
        )
        with engine.begin() as db:
            for table in TABLES:
                if table.late:
                    db.execute(sa.text(f"INSERT INTO {written_to(table)} VALUES (200, 'late', 9)"))
        compactions = [
            f'{name}\n[tables."app.{table.name}".compaction]\nevery = "1h"\nwait_minutes = 0\n'
            for name, table in zip(names, TABLES, strict=True)
        ]
        lines += run_service(
            root / "offload_home",
            ["[defaults]", 'extraction_interval = "1h"', "", *compactions],
            metrics,
            len(TABLES),
        )
        yield Home(root, metrics, lines)
    engine.dispose()
    pg_server.drop_database("status_agreement")


def service_samples(
    metrics: ServiceMetrics,
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def report(home: Home, *args: str) -> Path:
    result = ok(run_cli("offload_status_report", f"--output-dir={home.path / 'reports'}", *args))
    return Path(result.stdout.strip().removeprefix("Report saved to "))


def test_service_runs_succeeded(home: Home) -> None:
    runs = [line for line in home.log_lines if line.startswith("run: ")]
    assert len(runs) == 2 * len(TABLES), home.log_lines
    assert all("outcome=success" in line for line in runs), runs


def test_every_surface_agrees(home: Home) -> None:
    samples = service_samples(home.metrics)
    by_json = {
        entry["table"]: entry
        for entry in json.loads(report(home, "--output-format=json").read_text())["tables"]
    }
    by_csv = {
        row["table"]: row
        for row in csv.DictReader(io.StringIO(report(home, "--output-format=csv").read_text()))
    }
    summary = report(home).read_text()
    detail = report(home, "--output-level=detail").read_text()
    html = report(home, "--output-format=html").read_text()
    for table in TABLES:
        status = json.loads(
            ok(run_cli("display_incremental_status", "-t", table.key, "--json")).stdout
        )
        text = ok(run_cli("display_incremental_status", "-t", table.key, "-v")).stdout
        extraction, compaction = status["extraction"], status["compaction"]
        immediate = table.mode == "IMMEDIATE"
        label = f"{table.key} ({table.method}, {table.mode})"

        # Changes: the changes taken from the source, the same figure everywhere.
        shipped = [
            line for line in home.log_lines if f"table={table.key} action=extraction" in line
        ]
        assert len(shipped) == 1 and f"shipped={table.changes} " in shipped[0], (label, shipped)
        service_run = int(re.search(r"run_id=(\d+)", shipped[0]).group(1))  # type: ignore[union-attr]
        compactions = [
            line for line in home.log_lines if f"table={table.key} action=compaction" in line
        ]
        # A DEFERRED compaction's own extraction shipped the late change: counted everywhere.
        assert len(compactions) == 1 and f" shipped={table.late} " in compactions[0], compactions
        assert extraction["changes_extracted"] == table.shipped, label
        assert samples[("gluon_service_changes_shipped_total", (("table", table.key),))] == (
            table.shipped
        ), label
        assert by_json[table.key]["changes_shipped"] == table.shipped, label
        assert by_csv[table.key]["changes_shipped"] == str(table.shipped), label
        assert f"; {table.shipped} changes shipped" in text, label
        assert f"; {table.shipped} changes shipped" in detail, label
        runs = {run["id"]: run for run in extraction["recent_runs"]}
        assert runs[service_run]["rows_read"] == table.changes, label
        assert sum(run["rows_read"] or 0 for run in runs.values()) == table.shipped, label

        # One run numbering: the repository's ids, labelled the same way.
        last_run = extraction["last_run"]["id"]
        assert by_json[table.key]["last_extraction_run"] == last_run, label
        assert by_csv[table.key]["last_extraction_run"] == str(last_run), label
        assert "Last extraction run:" in text and f"extraction run {last_run} success" in text
        assert f"extraction run {service_run} success" in text, label
        assert "#" not in text, (label, text)
        completed = compaction["last_completed"]["id"]
        assert compaction["completed_runs"] == 1, label
        assert f"run_id={completed} " in compactions[0], (label, compactions)
        assert by_json[table.key]["last_compaction_run"] == completed, label
        assert by_json[table.key]["compactions"] == 1, label
        assert by_json[table.key]["last_compaction_at"] is not None, label
        assert by_csv[table.key]["last_compaction_at"], label
        assert f"(compaction run {completed}, " in text, label
        assert (
            samples[
                (
                    "gluon_service_runs_total",
                    (("action", "compaction"), ("outcome", "success"), ("table", table.key)),
                )
            ]
            == 1
        ), label
        row = next(line for line in summary.splitlines() if line.strip().startswith(table.key))
        # Extracted and compacted; the last cell, Verified, says no verify has run.
        assert row.rstrip().endswith("never"), (label, row)
        assert "never" not in row.rstrip().removesuffix("never"), (label, row)

        # The merge mode, and nothing that contradicts it.
        assert by_json[table.key]["merge_mode"] == by_csv[table.key]["merge_mode"] == table.mode
        assert status["extraction"]["merge_mode"] == table.mode, label
        assert re.search(rf"Merge mode:\s+{table.mode} \(", text), label
        assert status["extraction"]["last_extraction_at"] is not None, label
        assert extraction["max_position"] is not None or table.method == "PG_LOGICAL", label
        if immediate:
            assert status["ingestion"] is None and status["staging"] is not None, label
            assert status["objects"]["internal_view"] is None, label
            for contradiction in (
                "Internal delta view",
                "Changes in the delta table",
                "to control partition",
                "Changes per control partition",
                "Delta view",
            ):
                assert contradiction not in text, (label, contradiction, text)
            assert by_json[table.key]["delta_rows"] is None, label
            assert by_csv[table.key]["delta_rows"] == "", label
            written = runs[service_run]["rows_written"]
            assert written == 3, (label, written)  # one change per key: 101, 102 and 1
            merged = "" if written == table.changes else f" ({written} rows merged)"
            assert f"{table.changes} changes{merged}" in text, label
        else:
            assert status["ingestion"] is not None and status["staging"] is None, label
            assert "Internal delta view (" in text and "Changes in the delta table" in text
            assert f"{table.changes} changes to control partition 0" in text, label
            # Compacted: only the late change, in control partition 1, is read by the views.
            assert by_json[table.key]["delta_rows"] == 1, label
        assert 'data-table="' + table.key + '"' in html, label


def deltalake_type_coercion(path: Path) -> str:
    """The error deltalake raises for a merge whose condition mixes types (the composite-key
    bug of issue 26 failed every IMMEDIATE extraction this way): a wrapper line, then its
    cause on ``caused by`` lines."""
    import deltalake
    import pyarrow as pa

    deltalake.write_deltalake(str(path), pa.table({"a": [1], "b": ["x"]}))
    with pytest.raises(Exception) as caught:
        deltalake.DeltaTable(str(path)).merge(
            pa.table({"a": ["1"], "b": ["y"]}),
            "t.a IS NOT DISTINCT FROM s.a AND t.b IS NOT DISTINCT FROM s.b",
            source_alias="s",
            target_alias="t",
        ).when_matched_update_all().execute()
    return str(caught.value)


def test_failures_show_the_line_that_names_the_problem(home: Home, tmp_path: Path) -> None:
    """A failed run records its error whole; status and the report show its cause, not only
    deltalake's wrapper line ``Generic DeltaTable error: type_coercion``."""
    message = deltalake_type_coercion(tmp_path / "mixed")
    wrapper, cause = message.split("\ncaused by\n")
    assert wrapper == "Generic DeltaTable error: type_coercion", message
    table = TABLES[0]
    repo = Repository(load_settings().repo_url)
    state = repo.incremental.get_state(table.key)
    assert state is not None
    run_id = repo.incremental.start_extraction(table.key, state.enablement_id)
    repo.incremental.finish_extraction(run_id, status="failed", message=message)
    try:
        text = ok(run_cli("display_incremental_status", "-t", table.key)).stdout
        shown = next(line for line in text.splitlines() if "Last extraction run" in line)
        assert shown.endswith(f"type_coercion: {cause}"), shown
        path = report(home, "--output-format=json", f"--table={table.key}")
        findings = json.loads(path.read_text())["findings"]
        failed = next(f for f in findings if f["code"] == "extraction_failed")
        assert failed["message"].endswith(f"type_coercion: {cause}"), failed
        assert f"(extraction run {run_id}," in failed["message"], failed
        detail = report(home, "--output-level=detail", f"--table={table.key}").read_text()
        assert cause in detail
    finally:  # the other tests of the module see the table as the service left it
        repo.incremental.finish_extraction(run_id, status="success", message=None)


def field(text: str, label: str) -> str:
    """The value printed after ``label:`` (first occurrence)."""
    match = re.search(rf"^{re.escape(label)}:\s+(.*)$", text, re.M)
    assert match, f"no {label!r} line in:\n{text}"
    return match.group(1)


def test_a_batch_staged_but_not_merged_is_not_extracted(
    tmp_path: Path, offload_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """IMMEDIATE: a run killed after staging its batch, before the merge, extracted nothing.
    Status said ``Max change sequence extracted: 5`` (the staging table's highest gl_seq)
    beside ``Most recent extraction time: never``; now both say nothing was extracted, until
    the next run merges the batch."""
    app = App(f"sqlite:///{tmp_path / 'app.db'}", "main")
    monkeypatch.setenv("GLUON_SOURCE_URL", app.url)
    table = app.create_table("staged", 3)
    ok(
        run_cli(
            "offload",
            "-t",
            table,
            "-x",
            "--incremental-updates-enabled",
            "--incremental-extraction-method=CHANGELOG",
            "--incremental-merge-mode=IMMEDIATE",
        )
    )
    app.change(table, first_key=100)
    crashed = run_offload_process(
        "-t",
        table,
        "-x",
        "--incremental-run-extraction",
        env={"GLUON_FAULT": "extract.after_stage"},
    )
    assert crashed.returncode == FAULT_EXIT_CODE, crashed.stderr
    text = ok(run_cli("display_incremental_status", "-t", table)).stdout
    assert field(text, "Most recent extraction time") == "never"
    assert field(text, "Max change sequence extracted") == "none extracted yet"
    assert field(text, "Changes in the staging table").startswith("5 ")

    ok(run_cli("offload", "-t", table, "-x", "--incremental-run-extraction"))
    text = ok(run_cli("display_incremental_status", "-t", table)).stdout
    assert field(text, "Max change sequence extracted") == "5"
    assert field(text, "Most recent extraction time") != "never"
    # The re-run merged the staged batch and took its changes out of the changelog: its own.
    assert field(text, "Extraction runs").endswith("; 5 changes shipped")
    assert ", 5 changes" in field(text, "Last extraction run")
