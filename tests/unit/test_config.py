"""Settings: environment over ``$OFFLOAD_HOME/conf/offload.env``, validation, defaults."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import sqlalchemy as sa

from gluon.config import EngineKind, load_settings
from gluon.env_file import parse_env_file
from gluon.errors import ConfigError, ExitCode, UsageError


def write_env_file(home: Path, text: str) -> Path:
    path = home / "conf" / "offload.env"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


# -- OFFLOAD_HOME ----------------------------------------------------------------------------


@pytest.mark.parametrize("environ", [{}, {"OFFLOAD_HOME": ""}])
def test_missing_offload_home_names_the_variable(environ: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="OFFLOAD_HOME") as caught:
        load_settings(environ)
    assert caught.value.exit_code == ExitCode.USAGE
    assert isinstance(caught.value, UsageError)


def test_explicit_environ_ignores_the_process_environment(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", "sqlite:////from/process.db")
    settings = load_settings({"OFFLOAD_HOME": str(home)})
    assert settings.source_url is None


def test_offload_home_expands_the_user_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    settings = load_settings({"OFFLOAD_HOME": "~/offload"})
    assert settings.offload_home == Path("/home/someone/offload")


# -- defaults --------------------------------------------------------------------------------


def test_defaults_live_under_offload_home(home: Path) -> None:
    settings = load_settings({"OFFLOAD_HOME": str(home)})
    assert settings.offload_home == home
    assert settings.lake_root == str(home / "lake")
    assert settings.repo_url == f"sqlite:///{home / 'repo' / 'gluon.db'}"
    assert sa.engine.make_url(settings.repo_url).database == str(home / "repo" / "gluon.db")
    assert settings.log_dir == home / "log"
    assert settings.run_dir == home / "run"
    assert settings.engine is EngineKind.SAIL
    assert settings.source_url is None
    assert settings.spark_remote is None
    assert settings.spark_master is None


def test_require_source_url_names_the_variable(home: Path) -> None:
    settings = load_settings({"OFFLOAD_HOME": str(home)})
    with pytest.raises(ConfigError, match="GLUON_SOURCE_URL"):
        settings.require_source_url()


def test_explicit_settings_replace_the_defaults(home: Path, tmp_path: Path) -> None:
    settings = load_settings(
        {
            "OFFLOAD_HOME": str(home),
            "GLUON_SOURCE_URL": "sqlite:////data/app.db",
            "OFFLOAD_LAKE_ROOT": "s3://bucket/lake",
            "GLUON_REPO_URL": "postgresql+psycopg://gluon@repo/gluon",
            "OFFLOAD_LOGDIR": str(tmp_path / "logs"),
        }
    )
    assert settings.require_source_url() == "sqlite:////data/app.db"
    assert settings.lake_root == "s3://bucket/lake"
    assert settings.repo_url == "postgresql+psycopg://gluon@repo/gluon"
    assert settings.log_dir == tmp_path / "logs"


@pytest.mark.parametrize(
    ("variable", "value"),
    [("GLUON_SOURCE_URL", "/data/app.db"), ("GLUON_REPO_URL", "repo.db")],
)
def test_a_url_setting_that_is_not_a_url_is_refused(home: Path, variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        load_settings({"OFFLOAD_HOME": str(home), variable: value})


# -- the env file ----------------------------------------------------------------------------


def test_env_file_values_are_used(home: Path) -> None:
    write_env_file(
        home,
        "# gluon settings\n"
        "\n"
        "GLUON_SOURCE_URL=sqlite:////data/app.db\n"
        "export OFFLOAD_LAKE_ROOT='/srv/lake with space'  # trailing comment\n"
        'OFFLOAD_LOGDIR="/var/log/gluon"\n',
    )
    settings = load_settings({"OFFLOAD_HOME": str(home)})
    assert settings.source_url == "sqlite:////data/app.db"
    assert settings.lake_root == "/srv/lake with space"
    assert settings.log_dir == Path("/var/log/gluon")


def test_environment_wins_over_the_env_file(home: Path) -> None:
    write_env_file(home, "GLUON_SOURCE_URL=sqlite:////from/file.db\nOFFLOAD_LAKE_ROOT=/file/lake\n")
    settings = load_settings(
        {"OFFLOAD_HOME": str(home), "GLUON_SOURCE_URL": "sqlite:////from/env.db"}
    )
    assert settings.source_url == "sqlite:////from/env.db"
    assert settings.lake_root == "/file/lake"  # not overridden: the file's value stays


def test_a_malformed_env_file_line_is_reported_with_file_and_line(home: Path) -> None:
    path = write_env_file(home, "# settings\nGLUON_SOURCE_URL=sqlite:////a.db\nthis is not valid\n")
    with pytest.raises(ConfigError) as caught:
        load_settings({"OFFLOAD_HOME": str(home)})
    assert f"{path}:3" in str(caught.value)
    assert "this is not valid" in str(caught.value)


def test_an_unbalanced_quote_is_reported_with_file_and_line(home: Path) -> None:
    path = write_env_file(home, "OFFLOAD_LAKE_ROOT='/srv/lake\n")
    with pytest.raises(ConfigError, match=f"{path}:1: .*OFFLOAD_LAKE_ROOT"):
        parse_env_file(path)


# -- Oracle's ORA_* variables ----------------------------------------------------------------


def test_ora_conn_with_user_and_password_builds_an_oracledb_url(home: Path) -> None:
    password = "p@ss:w/rd%#?"
    settings = load_settings(
        {
            "OFFLOAD_HOME": str(home),
            "ORA_CONN": "dbhost:1521/FREEPDB1",
            "ORA_APP_USER": "gluon_app",
            "ORA_APP_PASS": password,
        }
    )
    url = settings.require_source_url()
    assert url.startswith("oracle+oracledb://gluon_app:")
    assert password not in url  # quoted, so the URL parses back to the same password
    parts = urlsplit(url)
    assert unquote(parts.password or "") == password
    assert (parts.hostname, parts.port) == ("dbhost", 1521)
    assert parse_qs(parts.query) == {"service_name": ["FREEPDB1"]}
    parsed = sa.engine.make_url(url)
    assert parsed.password == password
    assert parsed.username == "gluon_app"
    assert parsed.query == {"service_name": "FREEPDB1"}


def test_gluon_source_url_wins_over_ora_conn(home: Path) -> None:
    settings = load_settings(
        {
            "OFFLOAD_HOME": str(home),
            "GLUON_SOURCE_URL": "sqlite:////data/app.db",
            "ORA_CONN": "dbhost:1521/FREEPDB1",
            "ORA_APP_USER": "u",
            "ORA_APP_PASS": "p",
        }
    )
    assert settings.source_url == "sqlite:////data/app.db"


@pytest.mark.parametrize(
    "credentials",
    [{}, {"ORA_APP_USER": "gluon_app"}, {"ORA_APP_PASS": "secret"}],
    ids=["neither", "no-password", "no-user"],
)
def test_ora_conn_without_user_or_password_is_refused(
    home: Path, credentials: dict[str, str]
) -> None:
    environ = {"OFFLOAD_HOME": str(home), "ORA_CONN": "dbhost:1521/FREEPDB1", **credentials}
    with pytest.raises(ConfigError, match="ORA_APP_USER"):
        load_settings(environ)


@pytest.mark.parametrize("conn", ["dbhost", "dbhost/FREEPDB1", "dbhost:1521"])
def test_ora_conn_must_be_host_port_service(home: Path, conn: str) -> None:
    environ = {
        "OFFLOAD_HOME": str(home),
        "ORA_CONN": conn,
        "ORA_APP_USER": "u",
        "ORA_APP_PASS": "p",
    }
    with pytest.raises(ConfigError, match="ORA_CONN"):
        load_settings(environ)


# -- the lake engine -------------------------------------------------------------------------


def test_a_bad_engine_lists_the_choices(home: Path) -> None:
    with pytest.raises(ConfigError, match="GLUON_ENGINE") as caught:
        load_settings({"OFFLOAD_HOME": str(home), "GLUON_ENGINE": "duckdb"})
    message = str(caught.value)
    assert "'duckdb'" in message
    for choice in ("sail", "remote", "classic"):
        assert choice in message


@pytest.mark.parametrize("value", ["SAIL", "Sail", "sail"])
def test_the_engine_name_is_case_insensitive(home: Path, value: str) -> None:
    assert load_settings({"OFFLOAD_HOME": str(home), "GLUON_ENGINE": value}).engine is (
        EngineKind.SAIL
    )


def test_spark_remote_selects_the_remote_engine(home: Path) -> None:
    settings = load_settings({"OFFLOAD_HOME": str(home), "SPARK_REMOTE": "sc://spark:15002"})
    assert settings.engine is EngineKind.REMOTE
    assert settings.spark_remote == "sc://spark:15002"


def test_spark_master_selects_classic_spark(home: Path) -> None:
    settings = load_settings({"OFFLOAD_HOME": str(home), "GLUON_SPARK_MASTER": "local[2]"})
    assert settings.engine is EngineKind.CLASSIC
    assert settings.spark_master == "local[2]"


def test_an_explicit_engine_wins_over_spark_remote(home: Path) -> None:
    settings = load_settings(
        {"OFFLOAD_HOME": str(home), "SPARK_REMOTE": "sc://spark:15002", "GLUON_ENGINE": "sail"}
    )
    assert settings.engine is EngineKind.SAIL


@pytest.mark.parametrize("remote", ["http://spark:15002", "spark:15002"])
def test_spark_remote_must_be_a_spark_connect_url(home: Path, remote: str) -> None:
    with pytest.raises(ConfigError, match="SPARK_REMOTE") as caught:
        load_settings({"OFFLOAD_HOME": str(home), "SPARK_REMOTE": remote})
    assert "sc://" in str(caught.value)


def test_the_remote_engine_needs_spark_remote(home: Path) -> None:
    with pytest.raises(ConfigError, match="SPARK_REMOTE"):
        load_settings({"OFFLOAD_HOME": str(home), "GLUON_ENGINE": "remote"})


def test_the_engine_can_come_from_the_env_file(home: Path) -> None:
    write_env_file(home, "SPARK_REMOTE=sc://cluster:15002\n")
    settings = load_settings({"OFFLOAD_HOME": str(home)})
    assert settings.engine is EngineKind.REMOTE
    assert settings.spark_remote == "sc://cluster:15002"
