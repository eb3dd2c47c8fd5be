"""The ``offload`` options are declared once (``gluon/cli/offload_options.py``); what is derived
from the declarations agrees with the docs and with the registries it lists."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import typer.main
from support.cli import error_lines, run_cli
from typer.core import TyperOption

from gluon.cli.declare import declared_options, doc_heading
from gluon.cli.offload import app as offload_app
from gluon.cli.offload_options import OffloadArguments
from gluon.compact.options import CompactionMethod
from gluon.methods import registered_methods
from gluon.states import MergeMode

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def offload_options() -> list[Any]:
    return list(typer.main.get_command(offload_app).params)


def help_of(flag: str) -> str:
    """The help text ``offload --help`` prints for ``flag``, on one line."""
    for parameter in offload_options():
        if flag in parameter.opts:
            return " ".join(str(parameter.help).split())
    raise AssertionError(f"offload has no option {flag}")


def section_5_headings() -> list[str]:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## 5. ", 1)[1].split("\n## 6. ", 1)[0]
    return [
        line.split(" | ")[0].removeprefix("| ")
        for line in section.splitlines()
        if line.startswith("| `")
    ]


def test_architecture_section_5_has_a_row_for_every_offload_option_in_order() -> None:
    expected = [doc_heading(parameter.opts, parameter.name) for parameter in offload_options()]
    assert section_5_headings() == expected


def test_every_declared_option_is_a_parameter_of_offload_with_its_flags() -> None:
    parameters = {parameter.name: parameter for parameter in offload_options()}
    for declared in declared_options(OffloadArguments):
        parameter = parameters[declared.name]
        assert isinstance(parameter, TyperOption)
        assert tuple(parameter.opts) == declared.spec.flags
        assert declared.spec.accepted_by, f"{declared.name} is accepted by no action"


def test_offload_help_lists_every_extraction_method() -> None:
    text = help_of("--incremental-extraction-method")
    assert [name for name in registered_methods() if name not in text] == []
    for name, method in registered_methods().items():
        assert method.summary, f"{name} has no summary for --help"
        assert f"{name} ({method.summary})" in text, name


def test_offload_help_lists_every_merge_mode() -> None:
    text = help_of("--incremental-merge-mode")
    for mode in MergeMode:
        assert re.search(rf"\b{mode.value}\b", text), mode


def test_offload_help_names_one_flag_for_each_compaction_method() -> None:
    method_flags = [
        declared.spec.flag
        for declared in declared_options(OffloadArguments)
        if declared.spec.sets == "method"
    ]
    named = {
        method: [
            flag for flag in method_flags if f"Compaction method {method.value}:" in help_of(flag)
        ]
        for method in CompactionMethod
    }
    assert all(len(flags) == 1 for flags in named.values()), named
    assert len(method_flags) == len(CompactionMethod)


def test_the_whole_offload_help_shows_the_values() -> None:
    result = run_cli("offload", "--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    values = [*registered_methods(), *MergeMode, *CompactionMethod]
    assert [value for value in values if value not in text] == []


def test_a_key_column_named_twice_is_refused_before_anything(
    offload_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "app.db"
    with sqlite3.connect(source) as connection:
        connection.execute("CREATE TABLE products (a INTEGER NOT NULL, b TEXT NOT NULL)")
        connection.execute("INSERT INTO products VALUES (1, 'x')")
    monkeypatch.setenv("GLUON_SOURCE_URL", f"sqlite:///{source}")
    result = run_cli(
        "offload",
        "-t",
        "main.products",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
        "--incremental-key-columns=b, a,B",
    )
    assert result.exit_code == 2, result.stderr
    assert error_lines(result) == [
        "offload: error: --incremental-key-columns=b, a,B names B twice: name each key column once"
    ]
    assert result.stdout == ""
    assert list(offload_home.iterdir()) == []  # no log, no repository, no lake


def test_options_declared_with_string_annotations_are_refused() -> None:
    """This module has ``from __future__ import annotations``: typer would read the text."""
    import dataclasses

    from gluon.cli.declare import option

    @dataclasses.dataclass(frozen=True)
    class Declared:
        size: int = option("--size", default=1, help="A size.")

    with pytest.raises(TypeError, match=re.escape("Declared.size: its type is the string 'int'")):
        list(declared_options(Declared))


def test_two_actions_are_refused_with_every_action_flag_listed(offload_home: Path) -> None:
    result = run_cli(
        "offload",
        "-t",
        "main.products",
        "--incremental-print-grants",
        "--incremental-set-aside-changes=3",
    )
    assert result.exit_code == 2, result.stderr
    [line] = error_lines(result)
    listed = line.removeprefix("offload: error: use only one of ").split(", ")
    assert "--incremental-print-grants" in listed
    assert "--incremental-set-aside-changes" in listed
    assert all(flag.startswith("--incremental-") and " " not in flag for flag in listed), listed
