"""The env file reads the same in gluon and in the bin/ wrappers (bash sources it): a line
bash would read otherwise is refused naming file and line, and a name that looks like a
gluon setting but is not one is named with the nearest setting (issue 30)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import error_lines
from typer.testing import Result

from gluon.env_file import parse_env_file

RunCli = Callable[..., Result]


def write_env(home: Path, text: str) -> Path:
    path = home / "conf" / "offload.env"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("line", "fragments"),
    [
        ("GLUON_SOURCE_LOCK_TIMEOUT = 5", ("without spaces around '='",)),
        ("GLUON_SOURCE_LOCK_TIMEOUT= 5", ("without spaces around '='",)),
        ("OFFLOAD_LAKE_ROOT=/srv/my lake", ("holds a space: quote it",)),
        ("OFFLOAD_LAKE_ROOT=$OFFLOAD_HOME/lake", ("does not expand variables",)),
        ('OFFLOAD_LAKE_ROOT="$HOME/lake"', ("does not expand variables",)),
        ("GLUON_REPO_URL=sqlite:////srv/a#b.db", ("holds a # inside a word: quote",)),
        ("GLUON_SOURCE_CONECT_TIMEOUT=5", ("did you mean GLUON_SOURCE_CONNECT_TIMEOUT?",)),
        ("OFFLOAD_LAKEROOT=/srv/lake", ("did you mean OFFLOAD_LAKE_ROOT?",)),
        ("export GLUON_REPO=sqlite:////srv/r.db", ("did you mean GLUON_REPO_URL?",)),
    ],
)
def test_a_line_bash_reads_otherwise_or_a_misspelt_setting_is_refused(
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
    line: str,
    fragments: tuple[str, ...],
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", f"sqlite:///{offload_home.parent / 'app.db'}")
    path = write_env(offload_home, f"# settings\nGLUON_DEBUG=\n{line}\n")
    result = run_cli("offload", "-t", "main.products", "-x")
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"offload: error: {path}:3: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert result.exit_code == 2
    assert sorted(p.name for p in offload_home.iterdir()) == ["conf"]  # not even a log


def test_a_misspelt_setting_in_the_environment_is_a_warning(
    offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process environment holds other programs' variables too: a near miss of a
    setting is named, and the command goes on."""
    monkeypatch.setenv("GLUON_SOURCE_STATEMENT_TIMOUT", "5")
    monkeypatch.setenv("GLUON_SOMETHING_ELSE", "x")  # no setting is near: not gluon's
    monkeypatch.setenv("GLUON_SOURCE_URL", f"sqlite:///{offload_home.parent / 'app.db'}")
    result = run_cli("display_incremental_status", "-t", "main.products")
    warnings = [line for line in error_lines(result) if ": warning: " in line]
    assert warnings == [
        "display_incremental_status: warning: GLUON_SOURCE_STATEMENT_TIMOUT is not a gluon "
        "setting and is ignored: did you mean GLUON_SOURCE_STATEMENT_TIMEOUT?"
    ]


ACCEPTED = """\
# every form gluon accepts
GLUON_SOURCE_URL=sqlite:////srv/app.db
export OFFLOAD_LAKE_ROOT='/srv/my lake'
OFFLOAD_LOGDIR="/var/log/gluon"   # a comment after the value
ORA_APP_PASS='pa$$ "word"'
GLUON_REPO_URL='postgresql+psycopg://gluon:pa#ss@repohost/gluon'  # quoted: a # is kept
ORA_APP_USER=gluon\\ app
GLUON_SOURCE_LOCK_TIMEOUT=
  GLUON_ENGINE=sail
AWS_REGION=eu-west-1
"""


def test_what_gluon_accepts_bash_reads_the_same(tmp_path: Path) -> None:
    """Sourced as bin/gluon-wrapper.sh sources it (``set -a; . file``): the same values."""
    path = tmp_path / "offload.env"
    path.write_text(ACCEPTED, encoding="utf-8")
    ours = parse_env_file(path)
    names = " ".join(ours)
    script = (
        f'set -a; . "{path}"; set +a; for k in {names}; do printf "%s=%s\\0" "$k" "${{!k}}"; done'
    )
    output = subprocess.run(
        ["bash", "-c", script], capture_output=True, check=True, env={"PATH": "/usr/bin:/bin"}
    )
    assert output.stderr == b""
    theirs = dict(item.split("=", 1) for item in output.stdout.decode().split("\0") if item)
    assert theirs == ours
    assert ours["ORA_APP_PASS"] == 'pa$$ "word"' and ours["OFFLOAD_LAKE_ROOT"] == "/srv/my lake"


def test_the_template_is_accepted() -> None:
    template = Path(__file__).parents[2] / "conf" / "offload.env.template"
    assert "GLUON_SOURCE_URL" in parse_env_file(template)
