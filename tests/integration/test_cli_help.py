"""``--help`` works without any settings and documents every option of every command."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import typer
from typer.core import TyperArgument, TyperGroup, TyperOption
from typer.testing import Result

from gluon.cli import app as gluon_app
from gluon.cli import offload as offload_app

RunCli = Callable[..., Result]


def command_of(app: typer.Typer, name: str | None = None) -> Any:
    command = typer.main.get_command(app)
    if name is None:
        return command
    assert isinstance(command, TyperGroup)
    return command.commands[name]


def assert_documents_every_parameter(command: Any, text: str) -> None:
    assert command.params
    for param in command.params:
        if isinstance(param, TyperOption):
            for opt in [*param.opts, *param.secondary_opts]:
                assert opt in text, f"{opt} is missing from the help"
            assert param.help, f"{param.opts[0]} has no help text"
        else:
            assert isinstance(param, TyperArgument)
            assert (param.name or "").lower() in text.lower()
            assert param.help, f"argument {param.name} has no help text"


@pytest.fixture(autouse=True)
def no_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Help needs no OFFLOAD_HOME and no source."""
    for name in ("OFFLOAD_HOME", "GLUON_SOURCE_URL"):
        monkeypatch.delenv(name, raising=False)


def test_offload_help(run_cli: RunCli) -> None:
    result = run_cli("offload", "--help")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    text = result.stdout
    assert "Usage: offload" in text
    for option in (
        "-t",
        "--table",
        "-x",
        "--execute",
        "--reset-backend-table",
        "--partition-columns",
        "--partition-granularity",
        "-v",
        "--verbose",
        "--debug",
        "--help",
    ):
        assert option in text
    assert "SCHEMA.TABLE" in text
    assert "Without -x" in text
    assert_documents_every_parameter(command_of(offload_app.app), text)


def test_gluon_query_help(run_cli: RunCli) -> None:
    result = run_cli("gluon", "query", "--help")
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert "Usage: gluon query" in text
    for option in ("--json", "--csv", "-v", "--verbose", "--debug", "--help"):
        assert option in text
    assert "statement" in text.lower()
    assert_documents_every_parameter(command_of(gluon_app.app, "query"), text)


def test_gluon_help_lists_every_command(run_cli: RunCli) -> None:
    result = run_cli("gluon", "--help")
    assert result.exit_code == 0, result.stderr
    group = command_of(gluon_app.app)
    assert isinstance(group, TyperGroup)
    assert "query" in group.commands
    for name, command in group.commands.items():
        assert name in result.stdout
        assert command.help or command.short_help, f"gluon {name} has no help"
