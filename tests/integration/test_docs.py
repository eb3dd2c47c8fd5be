"""The doc-test: every shell command in README.md and docs/*.md is run, or skipped for a reason.

Shell blocks are the fenced blocks marked ``bash``, ``sh``, ``shell``, ``console`` or
``crontab``, or not marked at all (output, SQL and diagrams are marked ``text`` or ``sql``).
Each command in them (a line, with ``\\`` continuations) is one test case:

- its options must exist: each ``-x``/``--name`` is looked up in the options the command's
  ``--help`` documents (the Click parameters it is built from; tests/integration/
  test_cli_help.py checks that ``--help`` shows every one), skipped commands included;
- a command of gluon's (``offload``, ``gluon``, ``display_incremental_status``,
  ``offload_status_report``, also as ``$OFFLOAD_HOME/bin/NAME``) then runs as written under
  ``bash`` and must exit 0, against the sample SQLite source of scripts/sample_source.py:
  the docs' example table ``SH.PRODUCTS`` is its ``main.products``, offloaded with incremental
  update enabled (CHANGELOG) and changed since, in one home shared in document order. An
  enabling command runs in a fresh home of its own (nothing offloaded yet);
- a command the doc-test must not run (one that needs Oracle, cron or systemd, installs
  something, or destroys state) follows a ``# doc-test: skip (REASON)`` line in its block:
  the marker skips the rest of the block, and pytest reports the reason. Any other command
  that is not gluon's fails: the docs must say why it is not run.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.core import TyperGroup

from gluon.cli import app as gluon_app
from gluon.cli import offload as offload_app
from gluon.cli import report as report_app
from gluon.cli import status as status_app

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
SHELL_LANGUAGES = {"", "bash", "sh", "shell", "console", "crontab"}
SKIP_MARKER = re.compile(r"^#\s*doc-test:\s*skip\b\s*(?:\((?P<reason>.*)\))?\s*$")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```", re.S | re.M)
APPS: dict[str, typer.Typer] = {
    "offload": offload_app.app,
    "gluon": gluon_app.app,
    "display_incremental_status": status_app.app,
    "offload_status_report": report_app.app,
}
SAMPLE_SOURCE = REPO_ROOT / "scripts" / "sample_source.py"
DOC_TABLE = re.compile(r"\bSH\.PRODUCTS\b", re.I)
SAMPLE_TABLE = "main.products"


@dataclass(frozen=True)
class DocCommand:
    doc: str
    """The file, relative to the repository root."""
    line: int
    text: str
    """The command as written (continuations joined, a crontab line's schedule removed)."""
    skip: str | None
    """The reason of the ``# doc-test: skip`` marker above it in its block, if any."""

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def words(self) -> list[str]:
        """The command's words, without leading ``NAME=value`` settings and the comment."""
        words = shlex.split(self.text, comments=True)
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words.pop(0)
        return words

    @property
    def program(self) -> str | None:
        """gluon's program the command runs (``$OFFLOAD_HOME/bin/NAME`` is ``NAME``)."""
        words = self.words
        if not words:
            return None
        name = words[0].removeprefix("$OFFLOAD_HOME/bin/")
        return name if name in APPS else None


def shell_commands(doc: Path, text: str) -> Iterator[DocCommand]:
    """The commands of ``text``'s shell blocks, with the skip reason of each."""
    relative = doc.relative_to(REPO_ROOT).as_posix() if doc.is_absolute() else str(doc)
    for block in FENCE.finditer(text):
        if block.group("lang") not in SHELL_LANGUAGES:
            continue
        first = text.count("\n", 0, block.start("body")) + 1
        skip: str | None = None
        pending: list[str] = []
        start = first
        for number, raw in enumerate(block.group("body").splitlines(), start=first):
            line = raw.strip()
            if not pending:
                start = number
                marker = SKIP_MARKER.match(line)
                if marker:
                    skip = (marker.group("reason") or "").strip()
                    assert skip, f"{relative}:{number}: a doc-test skip marker needs a (reason)"
                    continue
                if not line or line.startswith("#"):
                    continue
                if block.group("lang") == "crontab":
                    if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", line):
                        continue  # a crontab variable, not a job
                    line = line.split(None, 5)[5]
            if line.endswith("\\"):
                pending.append(line[:-1].rstrip())
                continue
            yield DocCommand(relative, start, " ".join([*pending, line]), skip)
            pending = []


def documented_commands() -> list[DocCommand]:
    return [command for doc in DOCS for command in shell_commands(doc, doc.read_text())]


def command_options(program: str, words: list[str]) -> tuple[str, set[str]]:
    """The command's name for messages (``gluon query``) and every option its --help lists."""
    command: Any = typer.main.get_command(APPS[program])
    name = program
    if isinstance(command, TyperGroup):
        sub = next((word for word in words[1:] if not word.startswith("-")), None)
        if sub is None or sub not in command.commands:
            raise AssertionError(f"`{program}` has no command {sub!r}")
        command, name = command.commands[sub], f"{program} {sub}"
    options = {"--help"}
    for param in command.params:
        options.update(getattr(param, "opts", []))
        options.update(getattr(param, "secondary_opts", []))
    return name, options


def unknown_options(command: DocCommand) -> list[str]:
    """The options of ``command`` that its program's --help does not list."""
    program = command.program
    assert program is not None
    words = command.words
    name, known = command_options(program, words)
    used = [word.split("=", 1)[0] for word in words[1:] if re.match(r"^--?[A-Za-z]", word)]
    return [f"{name} {option}" for option in used if option not in known]


COMMANDS = documented_commands()


class SampleHomes:
    """OFFLOAD_HOMEs on the sample SQLite source, laid out as docs/operations.md says."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.count = 0
        self.shared: Path | None = None

    def fresh(self) -> Path:
        """A home whose sample source has ``main.products`` and nothing offloaded."""
        self.count += 1
        home = self.root / f"home{self.count}"
        (home / "conf").mkdir(parents=True)
        (home / "log").mkdir()
        (home / "bin").symlink_to(REPO_ROOT / "bin")
        (home / "conf" / "offload.env").write_text(
            f"GLUON_SOURCE_URL=sqlite:///{home / 'sample.db'}\n"
        )
        self.sample("create", home)
        return home

    def enabled(self) -> Path:
        """The shared home: ``main.products`` offloaded and enabled (CHANGELOG), then changed."""
        if self.shared is None:
            home = self.fresh()
            result = self.run(
                home,
                f"offload -t {SAMPLE_TABLE} -x --incremental-updates-enabled "
                "--incremental-extraction-method=CHANGELOG",
            )
            assert result.returncode == 0, result.stderr
            self.sample("change", home)
            self.shared = home
        return self.shared

    def sample(self, action: str, home: Path) -> None:
        subprocess.run(
            [sys.executable, str(SAMPLE_SOURCE), action, str(home / "sample.db")],
            check=True,
            capture_output=True,
        )

    def run(self, home: Path, line: str) -> subprocess.CompletedProcess[str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("GLUON_", "OFFLOAD_", "SPARK_", "ORA_"))
        }
        bin_dir = str(Path(sys.executable).parent)
        env.update(
            OFFLOAD_HOME=str(home),
            GLUON_VENV=sys.prefix,  # the wrappers' console scripts: this test's venv
            PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
            GLUON_SOURCE_URL=f"sqlite:///{home / 'sample.db'}",
        )
        return subprocess.run(
            ["bash", "-c", line],
            env=env,
            cwd=home,
            capture_output=True,
            text=True,
            timeout=300,
        )


@pytest.fixture(scope="module")
def homes(tmp_path_factory: pytest.TempPathFactory) -> SampleHomes:
    return SampleHomes(tmp_path_factory.mktemp("doc-test"))


def test_the_docs_have_commands_and_skip_markers() -> None:
    """Guards the extraction itself: README's commands are found, with their markers."""
    readme = [command for command in COMMANDS if command.doc == "README.md"]
    assert any(command.program == "offload" for command in readme)
    assert any(command.text == "bash scripts/test.sh" and command.skip for command in readme)
    assert all(command.skip for command in COMMANDS if command.program is None)


def test_an_option_that_no_longer_exists_is_found() -> None:
    doc = REPO_ROOT / "docs" / "example.md"
    text = (
        "```bash\n"
        "offload -t SH.PRODUCTS -x --incremental-run-extraction \\\n"
        "  --incremental-no-such-option=3   # comment --not-an-option\n"
        "gluon query --json 'SELECT 1'\n"
        "# doc-test: skip (an example)\n"
        "gluon querry 'SELECT 1'\n"
        "```\n"
        "```text\noffload --not-a-command\n```\n"
    )
    first, second, third = shell_commands(doc, text)
    assert (first.line, first.skip) == (2, None)
    assert unknown_options(first) == ["offload --incremental-no-such-option"]
    assert unknown_options(second) == []
    assert third.skip == "an example"
    with pytest.raises(AssertionError, match="no command 'querry'"):
        unknown_options(third)


@pytest.mark.parametrize("command", COMMANDS, ids=[command.where for command in COMMANDS])
def test_documented_command(command: DocCommand, homes: SampleHomes) -> None:
    if command.program is not None:
        unknown = unknown_options(command)
        assert not unknown, f"{command.where}: no such option: {', '.join(unknown)}"
    if command.skip is not None:
        pytest.skip(f"{command.where}: {command.skip}")
    assert command.program is not None, (
        f"{command.where}: `{command.text}` is not a command of gluon's the doc-test can run: "
        "run it here or mark it with a `# doc-test: skip (reason)` line above it"
    )
    line = DOC_TABLE.sub(SAMPLE_TABLE, command.text)
    enabling = "--incremental-updates-enabled" in command.words
    home = homes.fresh() if enabling else homes.enabled()
    result = homes.run(home, line)
    assert result.returncode == 0, (
        f"{command.where}: `{command.text}` exited {result.returncode}:\n"
        f"{result.stdout}\n{result.stderr}"
    )
