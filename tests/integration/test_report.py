"""``offload_status_report`` over tables in several states, in every level and format.

The states come from real runs (SQLite source, embedded Sail). The HTML report
is opened in a real headless Chromium: its rendered DOM must show the tables
and their numbers, and a screenshot is kept in ``test-artifacts/``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support.cli import GLUON_SETTINGS, error_lines, run_cli
from support.tables import App, compact, enable, extract, offload

from gluon.status.report_formats import COLUMNS, SUMMARY_COLUMNS

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
THRESHOLDS = ("--backlog-threshold=3", "--wait-threshold=0")
TABLES = ["MAIN.ITEMS", "MAIN.ORDERS", "MAIN.PLAIN"]
# Per table: base rows, live delta rows, changelog rows ("" when unknown or not enabled).
NUMBERS = {
    "MAIN.ITEMS": ("12", "6", "4"),
    "MAIN.ORDERS": ("7", "5", ""),
    "MAIN.PLAIN": ("3", "", ""),
}
FINDINGS = {
    ("MAIN.ITEMS", "compaction_waiting"),
    ("MAIN.ITEMS", "changelog_backlog"),
    ("MAIN.ITEMS", "delta_backlog"),
    ("MAIN.ORDERS", "extraction_failed"),
    ("MAIN.ORDERS", "capture_broken"),  # its changelog was dropped
    ("MAIN.ORDERS", "delta_backlog"),
}


@dataclass
class Home:
    path: Path
    out: Path


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    """Three tables: compaction waiting + backlog, a failed extraction, no incremental update."""
    root = tmp_path_factory.mktemp("report")
    with pytest.MonkeyPatch.context() as patch:
        for name in GLUON_SETTINGS:
            patch.delenv(name, raising=False)
        if os.environ.get("GLUON_TEST_SPARK_REMOTE"):
            patch.setenv("SPARK_REMOTE", os.environ["GLUON_TEST_SPARK_REMOTE"])
        patch.setenv("OFFLOAD_HOME", str(root / "offload_home"))
        app = App(f"sqlite:///{root / 'app.db'}", "main")
        patch.setenv("GLUON_SOURCE_URL", app.url)

        items = app.create_table("items", 12)
        enable(run_cli, items)
        app.change(items, first_key=100)
        app.run(f"INSERT INTO {items} VALUES (102, 'one more', 3)")
        extract(run_cli, items)  # 6 changes in control partition 0
        compact(run_cli, items, "--incremental-terminate-compaction")  # waits for an ack
        app.run(f"INSERT INTO {items} VALUES (103, 'a', 1), (104, 'b', 2), (105, 'c', 3)")
        app.run(f"UPDATE {items} SET amount = 7 WHERE id = 103")  # 4 changes wait

        orders = app.create_table("orders", 7)
        enable(run_cli, orders)
        app.change(orders, first_key=100)
        extract(run_cli, orders)  # 5 changes
        app.run(f"INSERT INTO {orders} VALUES (300, 'late', 1)")
        app.run("DROP TABLE main.main_h_orders_log")  # the next extraction fails for real
        assert run_cli("offload", "-t", orders, "-x", "--incremental-run-extraction").exit_code == 1

        offload(run_cli, app.create_table("plain", 3))
        yield Home(root / "offload_home", root / "reports")


def report(home: Home, *args: str) -> tuple[Path, list[str]]:
    """Run the report; return its file and the progress lines it printed (on stderr: stdout
    holds only where the report was saved)."""
    result = run_cli("offload_status_report", *THRESHOLDS, f"--output-dir={home.out}", *args)
    assert result.exit_code == 0, result.stderr
    saved = result.stdout.splitlines()
    assert len(saved) == 1 and saved[0].startswith("Report saved to "), saved
    path = Path(saved[0].removeprefix("Report saved to "))
    assert path.parent == home.out and path.is_file()
    return path, result.stderr.splitlines()


class TableRows(HTMLParser):
    """Cell texts of every row of the table with a given id."""

    def __init__(self, table_id: str) -> None:
        super().__init__()
        self.table_id = table_id
        self.inside = False
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and ("id", self.table_id) in attrs:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert Path(CHROMIUM).exists(), "Chromium is missing: run scripts/setup.sh"
    return subprocess.run(
        [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def test_progress_lines_file_name_and_default_directory(home: Home) -> None:
    path, lines = report(home)
    assert re.fullmatch(
        r"gluon_offload_status_report_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d{6}\.txt", path.name
    )
    steps = [line for line in lines if line and not line.startswith("Log file")]
    assert steps == [
        "Offload Status Report v0.1.0",
        "Find Tables For Report",
        "Done",
        "Fetch Repository, Source And Lake Data",
        "Done",
        "Process Report Data",
        "Done",
        "Generate Report",
        "Done",
    ]
    assert lines[-1].startswith("Log file: ") and "offload_status_report_" in lines[-1]
    result = run_cli("offload_status_report", "--output-format=json")
    assert result.exit_code == 0, result.stderr
    saved = next(line for line in result.stdout.splitlines() if line.startswith("Report saved"))
    assert Path(saved.removeprefix("Report saved to ")).parent == home.path / "log"


def test_text_summary_and_detail(home: Home) -> None:
    path, _ = report(home)
    text = path.read_text()
    assert "Level:       summary" in text
    for table in TABLES:
        base, delta, changelog = NUMBERS[table]
        line = next(line for line in text.splitlines() if line.strip().startswith(table + " "))
        cells = line.split()
        assert base in cells and (delta or "-") in cells, line
        if changelog:
            assert changelog in cells, line
    assert "Incremental Update Objects (RDBMS)" not in text
    for table, code in FINDINGS:
        assert re.search(rf"^\s+{table}\s+(error|warning)\s", text, re.M), code
    assert "waited for acknowledgement since" in text

    detail, _ = report(home, "--output-level=detail")
    text = detail.read_text()
    assert "Incremental Update Objects (RDBMS)" in text
    assert re.search(r"Changelog table\s+TABLE\s+main\.main_h_items_log", text)
    # SQLite has one trigger per event: the report lists the triggers that exist.
    for event in ("insert", "update", "delete"):
        assert re.search(rf"Changelog trigger\s+TRIGGER\s+main\.main_h_items_ct_{event}\b", text)
    assert not re.search(r"main\.main_h_items_ct\s", text), "a trigger that does not exist"
    assert re.search(r"Internal delta view\s+VIEW\s+main\.items_internal_user_view_0", text)
    assert re.search(r"Delta table\s+TABLE\s+main_load\.items_changes", text)
    assert re.search(r"main\.items_data\s+12\s+1\s", text)
    assert re.search(r"main_load\.orders_changes\s+5\s+1\s", text)
    assert re.search(r"^\s+0\s+6\s+1\s.*being compacted by compaction run 1", text, re.M)
    # MAIN.ORDERS's failed run: its second, whose id counts the runs of every table.
    assert "the last extraction (extraction run 3, " in text
    assert text.count("================\nTable MAIN.") == 3


def test_json_summary_and_detail(home: Home) -> None:
    for level in ("summary", "detail"):
        path, _ = report(home, f"--output-level={level}", "--output-format=json")
        document = json.loads(path.read_text())
        assert document["level"] == level
        assert document["table_count"] == 3 and document["attention_count"] == 6
        assert document["thresholds"] == {
            "backlog_rows": 3,
            "wait_minutes": 0.0,
            "lag_minutes": 60.0,
            "wal_retained_mb": 1024.0,
        }
        tables = {entry["table"]: entry for entry in document["tables"]}
        assert list(tables) == TABLES
        for table, (base, delta, changelog) in NUMBERS.items():
            entry = tables[table]
            expected_keys = [*SUMMARY_COLUMNS, "findings"] + (
                ["status"] if level == "detail" else []
            )
            assert list(entry) == expected_keys
            assert entry["base_rows"] == int(base)
            assert entry["delta_rows"] == (int(delta) if delta else None)
            assert entry["changelog_rows"] == (int(changelog) if changelog else None)
        assert {(f["table_key"], f["code"]) for f in document["findings"]} == FINDINGS
        assert tables["MAIN.PLAIN"]["extraction_method"] == "not enabled"
        assert tables["MAIN.ITEMS"]["compaction_in_progress"] == (
            "compaction run 1 at await_acknowledgement: waiting for acknowledgement"
        )
        if level == "detail":
            status = tables["MAIN.ORDERS"]["status"]
            assert status["extraction"]["last_run"]["status"] == "failed"
            assert status["ingestion"]["partitions"][0]["rows"] == 5


def test_csv_summary_and_detail(home: Home) -> None:
    for level, columns in (("summary", SUMMARY_COLUMNS), ("detail", tuple(COLUMNS))):
        path, _ = report(home, f"--output-level={level}", "--output-format=csv")
        rows = list(csv.DictReader(io.StringIO(path.read_text())))
        assert tuple(rows[0]) == columns
        by_table = {row["table"]: row for row in rows}
        assert list(by_table) == TABLES
        for table, (base, delta, changelog) in NUMBERS.items():
            row = by_table[table]
            assert (row["base_rows"], row["delta_rows"], row["changelog_rows"]) == (
                base,
                delta,
                changelog,
            )
        assert by_table["MAIN.ITEMS"]["attention"] == "3"
        if level == "detail":
            items = by_table["MAIN.ITEMS"]
            assert items["control_partitions"] == "0=6;1=0"
            assert "Changelog table|TABLE|main.main_h_items_log" in items["source_objects"]
            assert items["internal_view"] == "main.items_internal_user_view_0"
            assert "error: the last extraction" in by_table["MAIN.ORDERS"]["attention_messages"]


def test_html_in_headless_chromium(home: Home, tmp_path: Path) -> None:
    summary, _ = report(home, "--output-format=html")
    detail, _ = report(home, "--output-level=detail", "--output-format=html")
    for path in (summary, detail):
        page = path.read_text()
        assert not re.search(r"""(src|href)\s*=\s*["'](https?:)?//""", page), "fetches something"
        assert "<link" not in page and "@import" not in page and "url(" not in page
        assert page.count("<style>") == 1 and page.count("<script>") == 1

    for path, level in ((summary, "summary"), (detail, "detail")):
        dom = chromium(tmp_path / f"profile-{level}", "--dump-dom", path.as_uri()).stdout
        assert 'data-ready="1"' in dom, "the report's script did not run to its end"
        parser = TableRows("summary")
        parser.feed(dom)
        header, *rows = parser.rows
        assert header[0] == "Table" and header[3] == "Merge mode" and header[4] == "Base rows"
        cells = {row[0]: row for row in rows}
        assert list(cells) == TABLES
        for table, (base, delta, changelog) in NUMBERS.items():
            row = cells[table]
            shown = changelog or ("unknown" if table == "MAIN.ORDERS" else "-")
            assert (row[4], row[6], row[7]) == (base, delta or "-", shown), row
        assert cells["MAIN.ITEMS"][3] == "DEFERRED" and cells["MAIN.PLAIN"][3] == "-"
        assert cells["MAIN.ITEMS"][13] == "3" and cells["MAIN.PLAIN"][13] == "0"
        assert header[8:10] == ["Oldest pending", "Latency"]
        assert cells["MAIN.ORDERS"][8] == "unknown" and cells["MAIN.PLAIN"][8] == "-"
        assert ">Needs attention" in dom
        assert dom.count("<details") == (3 if level == "detail" else 0)

    dom = chromium(tmp_path / "profile-detail-2", "--dump-dom", detail.as_uri()).stdout
    items = dom[dom.index('id="table-main-items"') :]
    items = items[: items.index("</details>")]
    assert items.count("<rect") == 3, "2 control partitions and 1 extraction run"
    assert "main.main_h_items_log" in items and "main_load.items_changes" in items
    assert "being compacted by compaction run 1" in items

    ARTIFACTS.mkdir(exist_ok=True)
    for name, size in (
        ("offload_status_report_detail.png", "1280,900"),
        ("offload_status_report_detail_tall.png", "1280,2600"),
    ):
        shot = ARTIFACTS / name
        shot.unlink(missing_ok=True)
        chromium(
            tmp_path / f"profile-{name}",
            f"--screenshot={shot}",
            f"--window-size={size}",
            detail.as_uri(),
        )
        assert shot.stat().st_size > 10_000
    shutil.copy(detail, ARTIFACTS / "offload_status_report_detail.html")


MEASURE = """<script>
(function () {
  var page = document.documentElement, body = document.body, cells = {};
  document.querySelectorAll("#summary th").forEach(function (th) {
    cells[th.textContent.trim()] = Math.round(th.getBoundingClientRect().right);
  });
  body.setAttribute("data-viewport", String(page.clientWidth));
  body.setAttribute("data-scroll-width", String(page.scrollWidth));
  body.setAttribute("data-right-edges", JSON.stringify(cells));
}());
</script>
</body>"""


@pytest.mark.parametrize("level", ["summary", "detail"])
def test_html_fits_a_1400_pixel_window(home: Home, tmp_path: Path, level: str) -> None:
    """At 1,400 px the page does not scroll sideways and every summary column, Last
    extraction, Last compaction and Attention included, is inside the window (issue 30).
    Measured in a real Chromium: the page is opened with a script that records the layout."""
    path, _ = report(home, "--output-format=html", f"--output-level={level}")
    measured = tmp_path / "measured.html"
    measured.write_text(path.read_text().replace("</body>", MEASURE, 1))
    dom = chromium(
        tmp_path / "profile", "--window-size=1400,900", "--dump-dom", measured.as_uri()
    ).stdout
    viewport = int(re.search(r'data-viewport="(\d+)"', dom).group(1))  # type: ignore[union-attr]
    width = int(re.search(r'data-scroll-width="(\d+)"', dom).group(1))  # type: ignore[union-attr]
    edges = json.loads(
        re.search(r"data-right-edges=\"([^\"]*)\"", dom).group(1).replace("&quot;", '"')  # type: ignore[union-attr]
    )
    assert 1300 <= viewport <= 1400, viewport  # the window's width, less a scroll bar
    assert width <= viewport, f"scrolls sideways: {width} px of content in {viewport} px"
    for column in ("Last extraction", "Last compaction", "Attention"):
        assert edges[column] <= viewport, (column, edges)


def test_html_header_lists_every_threshold(home: Home) -> None:
    """The HTML header names the four thresholds the text report names, with their values."""
    text, _ = report(home)
    header = next(line for line in text.read_text().splitlines() if line.startswith("Thresholds:"))
    html, _ = report(home, "--output-format=html")
    page = html.read_text()
    listed = header.removeprefix("Thresholds:").strip().split(", ")
    assert len(listed) == 4, listed
    for threshold in listed:
        assert threshold in page, threshold


def test_filters(home: Home) -> None:
    path, _ = report(home, "--schema=main", "--table=items", "--output-format=json")
    assert [t["table"] for t in json.loads(path.read_text())["tables"]] == ["MAIN.ITEMS"]
    path, _ = report(home, "--table=MAIN.*S", "--output-format=json")
    assert [t["table"] for t in json.loads(path.read_text())["tables"]] == [
        "MAIN.ITEMS",
        "MAIN.ORDERS",
    ]
    missing = run_cli("offload_status_report", "--schema=SH", f"--output-dir={home.out}")
    assert missing.exit_code == 1
    assert missing.stdout == ""
    # Progress goes to stderr too (stdout is for the result): one error line after it.
    assert error_lines(missing) == [
        "Offload Status Report v0.1.0",
        "Find Tables For Report",
        "offload_status_report: error: no offloaded table matches --schema=SH (3 tables are "
        "offloaded; run without filters to see them all)",
    ]
    bad = run_cli("offload_status_report", "--output-format=pdf")
    assert bad.exit_code == 2


def test_merge_mode_in_every_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each table's merge mode: IMMEDIATE, DEFERRED, or none for a table not enabled."""
    for name in GLUON_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    if os.environ.get("GLUON_TEST_SPARK_REMOTE"):
        monkeypatch.setenv("SPARK_REMOTE", os.environ["GLUON_TEST_SPARK_REMOTE"])
    monkeypatch.setenv("OFFLOAD_HOME", str(tmp_path / "offload_home"))
    app = App(f"sqlite:///{tmp_path / 'app.db'}", "main")
    monkeypatch.setenv("GLUON_SOURCE_URL", app.url)
    merged = app.create_table("merged", 3)
    assert (
        run_cli(
            "offload",
            "-t",
            merged,
            "-x",
            "--incremental-updates-enabled",
            "--incremental-extraction-method=CHANGELOG",
            "--incremental-merge-mode=IMMEDIATE",
        ).exit_code
        == 0
    )
    app.change(merged, first_key=100)
    extract(run_cli, merged)
    enable(run_cli, app.create_table("viewed", 2))
    offload(run_cli, app.create_table("plain", 1))
    home = Home(tmp_path / "offload_home", tmp_path / "reports")
    expected = {"MAIN.MERGED": "IMMEDIATE", "MAIN.PLAIN": None, "MAIN.VIEWED": "DEFERRED"}

    path, _ = report(home, "--output-level=detail", "--output-format=json")
    tables = json.loads(path.read_text())["tables"]
    assert {entry["table"]: entry["merge_mode"] for entry in tables} == expected
    # The staging table's rows are merged already: no backlog to compact.
    assert [f["code"] for f in tables[0]["findings"]] == []
    path, _ = report(home, "--output-format=csv")
    rows = csv.DictReader(io.StringIO(path.read_text()))
    assert {row["table"]: row["merge_mode"] or None for row in rows} == expected
    path, _ = report(home)
    text = path.read_text()
    assert re.search(r"^\s+MAIN\.MERGED\s+CHANGELOG\s+IMMEDIATE\s", text, re.M)
    assert re.search(r"^\s+MAIN\.VIEWED\s+CHANGELOG\s+DEFERRED\s", text, re.M)
    assert re.search(r"^\s+MAIN\.PLAIN\s+not enabled\s+-\s", text, re.M)
    path, _ = report(home, "--output-level=detail")
    assert re.search(r"Merge mode:\s+IMMEDIATE", path.read_text())
    assert re.search(r"Merge mode:\s+DEFERRED", path.read_text())
    path, _ = report(home, "--output-format=html", "--output-level=detail")
    parser = TableRows("summary")
    parser.feed(path.read_text())
    header, *cells = parser.rows
    assert header[3] == "Merge mode"
    assert {row[0]: row[3] for row in cells} == {k: v or "-" for k, v in expected.items()}
    assert "merge IMMEDIATE" in path.read_text()
