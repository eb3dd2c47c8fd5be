"""``gluon service``'s tables file: what it accepts, and one line for what it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import error_lines, run_cli

from gluon.compact.options import CompactionMethod
from gluon.errors import ExitCode
from gluon.service.config import load_config
from gluon.service.config_values import ConfigFileError

GOOD = """
[service]
parallel = 3

[defaults]
extraction_interval = "1m"

[tables."SH.PRODUCTS"]
extraction_interval = "30s"
batch_size = 5000

[tables."SH.PRODUCTS".compaction]
window = "23:00-02:00"
every = "1d"
method = "full"
delta_threshold = 100
wait_minutes = 0.5
retain_obsolete_objects = true
acknowledgement_timeout = "10m"

[tables."sh.orders"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tables.toml"
    path.write_text(text)
    return path


def test_a_good_file_gives_every_setting_with_defaults_filled_in(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD))
    assert config.parallel == 3
    products, orders = config.tables
    assert products.key == "SH.PRODUCTS"
    assert products.extraction_interval_seconds == 30
    assert products.batch_size == 5000
    schedule = products.compaction
    assert schedule is not None
    assert str(schedule.window) == "23:00-02:00 UTC"
    assert schedule.every_seconds == 86400
    options = schedule.options
    assert options.table == products.ref
    assert options.method is CompactionMethod.FULL
    assert (options.delta_threshold, options.wait_minutes) == (100, 0.5)
    assert options.retain_obsolete_objects and not options.without_snapshot
    assert options.acknowledgement_timeout_seconds == 600
    assert orders.key == "SH.ORDERS"
    assert orders.extraction_interval_seconds == 60  # from [defaults]
    assert orders.compaction is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[tables.x", "not valid TOML"),
        ("", "no tables"),
        ('[tables."a.b"]\n', "table a.b: extraction_interval is missing"),
        ('[tables."a.b"]\nextraction_interval = 0\n', "table a.b: extraction_interval must be"),
        ('[tables."a.b"]\nextraction_interval = "5 minutes"\n', "found '5 minutes'"),
        ('[tables."a.b"]\nextraction_interval = true\n', "found True"),
        ('[tables."nodot"]\nextraction_interval = 1\n', "table nodot: not SCHEMA.TABLE"),
        ('[tables."a.b"]\nextraction_interval = 1\nintervall = 2\n', "unknown setting 'intervall'"),
        ('[tables."a.b"]\nextraction_interval = 1\nbatch_size = 0\n', "batch_size must be"),
        ('[service]\nparallel = 0\n[tables."a.b"]\nextraction_interval = 1\n', "parallel"),
        ('[tabels."a.b"]\n', "unknown setting 'tabels' in the file"),
        (
            '[tables."a.b"]\nextraction_interval = 1\n[tables."A.B"]\nextraction_interval = 1\n',
            "table A.B: declared twice (also as a.b)",
        ),
        (
            '[tables."a.b"]\nextraction_interval = 1\n[tables."a.b".compaction]\nmethod = "FULL"\n',
            "table a.b: compaction needs a window",
        ),
        (
            '[tables."a.b"]\nextraction_interval = 1\n[tables."a.b".compaction]\nevery = 1\n'
            'method = "QUICK"\n',
            "compaction method must be one of IN_PLACE, FULL, PARTITION_WISE_FULL",
        ),
        (
            '[tables."a.b"]\nextraction_interval = 1\n[tables."a.b".compaction]\n'
            'window = "25:00-02:00"\n',
            'compaction window must be "HH:MM-HH:MM"',
        ),
        (
            '[tables."a.b"]\nextraction_interval = 1\n[tables."a.b".compaction]\nevery = 1\n'
            "wait_minutes = -1\n",
            "table a.b: compaction wait_minutes must be a finite number of at least 0",
        ),
        (
            '[tables."a.b"]\nextraction_interval = 1\n[tables."a.b".compaction]\nevery = 1\n'
            'without_snapshot = "yes"\n',
            "without_snapshot must be true or false",
        ),
    ],
)
def test_a_bad_file_is_refused_with_one_line_naming_file_table_and_problem(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigFileError) as caught:
        load_config(path)
    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith(f"{path}: ")
    assert message in line
    assert caught.value.exit_code == ExitCode.USAGE


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError, match=r"cannot read the file"):
        load_config(tmp_path / "absent.toml")


def test_the_documented_example_file_is_accepted() -> None:
    example = Path(__file__).resolve().parents[2] / "docs" / "examples" / "tables.toml"
    config = load_config(example)
    assert [table.key for table in config.tables] == ["SH.PRODUCTS", "SH.SALES"]


def test_the_command_refuses_a_bad_file_with_one_line_and_exit_2_before_any_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OFFLOAD_HOME", str(tmp_path / "home"))
    path = write(tmp_path, '[tables."a.b"]\nextraction_interval = "soon"\n')
    result = run_cli("gluon", "service", "--config", path)
    assert result.exit_code == ExitCode.USAGE
    assert error_lines(result) == [
        f"gluon: error: {path}: table a.b: extraction_interval must be a duration above 0 "
        "(seconds, or a number with s, m, h or d such as \"30s\"), found 'soon'"
    ]
    assert not (tmp_path / "home" / "log").exists()
    bad_option = run_cli("gluon", "service", "--config", path, "--parallel", "0")
    assert bad_option.exit_code == ExitCode.USAGE
    assert error_lines(bad_option) == ["gluon: error: --parallel must be at least 1, found 0"]


def test_a_verify_schedule_is_read_and_checked(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[tables."a.b"]\nextraction_interval = 1\n[tables."a.b".verify]\n'
        'window = "02:00-04:00"\nevery = "1d"\nmax_rows_per_second = 500\n',
    )
    [table] = load_config(path).tables
    assert table.verify is not None
    assert (str(table.verify.window), table.verify.every_seconds) == ("02:00-04:00 UTC", 86400.0)
    assert (table.verify.max_rows_per_second, table.verify.retry_seconds) == (500, 300.0)
    assert table.compaction is None


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("", "verify needs a window"),
        ('window = "2-4"\n', 'verify window must be "HH:MM-HH:MM"'),
        ("every = 0\n", "verify every must be a duration above 0"),
        ("every = 1\nmax_rows_per_second = 0\n", "max_rows_per_second must be at least 1"),
        ("every = 1\nrepair = true\n", "unknown setting 'repair' in verify"),
    ],
)
def test_a_bad_verify_schedule_is_one_line(tmp_path: Path, section: str, message: str) -> None:
    path = write(
        tmp_path, f'[tables."a.b"]\nextraction_interval = 1\n[tables."a.b".verify]\n{section}'
    )
    with pytest.raises(ConfigFileError) as caught:
        load_config(path)
    assert message in str(caught.value) and "\n" not in str(caught.value)


CONTINUOUS = """
[defaults]
extraction_interval = "1m"

[tables."SH.ORDERS"]
continuous = true
poll_interval = 0.2
fold_files = 50

[tables."SH.PRODUCTS"]
"""


def test_a_continuous_table_keeps_its_poll_interval_and_fold_files(tmp_path: Path) -> None:
    orders, products = load_config(write(tmp_path, CONTINUOUS)).tables
    assert (orders.continuous, orders.poll_seconds, orders.fold_files) == (True, 0.2, 50)
    assert (products.continuous, products.poll_seconds, products.fold_files) == (False, 0.15, 200)


def test_a_continuous_table_needs_no_extraction_interval(tmp_path: Path) -> None:
    (table,) = load_config(write(tmp_path, '[tables."SH.ORDERS"]\ncontinuous = true\n')).tables
    assert table.continuous


def test_continuous_on_the_command_line_marks_every_table(tmp_path: Path) -> None:
    from gluon.service.config import all_continuous

    config = all_continuous(load_config(write(tmp_path, CONTINUOUS)))
    assert [table.continuous for table in config.tables] == [True, True]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ('continuous = "yes"', "continuous must be true or false, found 'yes'"),
        ("poll_interval = 0", "poll_interval must be a duration above 0"),
        ("fold_files = 1", "fold_files must be at least 2, found 1"),
        ('fold_files = "many"', "fold_files must be a whole number, found 'many'"),
    ],
)
def test_a_bad_continuous_setting_is_refused_in_one_line(
    tmp_path: Path, setting: str, message: str
) -> None:
    path = write(tmp_path, f'[tables."SH.ORDERS"]\nextraction_interval = 5\n{setting}\n')
    with pytest.raises(ConfigFileError) as refused:
        load_config(path)
    assert str(refused.value).startswith(f"{path}: table SH.ORDERS: {message}")
