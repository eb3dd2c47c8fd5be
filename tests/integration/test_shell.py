"""``gluon shell``: statements piped on stdin to a real child process (the non-terminal mode),
run in one engine session over real Delta tables."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.tables import App, offload
from support.terminal import Terminal
from typer.testing import Result

RunCli = Callable[..., Result]


@pytest.fixture
def app(offload_home: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli) -> App:
    """A SQLite source with ``main.products`` (3 rows) and ``main.orders`` (2), offloaded."""
    url = f"sqlite:///{offload_home.parent / 'app.db'}"
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    source = App(url, "main")
    for name, rows in (("products", 3), ("orders", 2)):
        source.create_table(name, rows)
        offload(run_cli, f"main.{name}")
    return source


def shell(script: str, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from gluon.cli.app import main; main()", "shell", *options],
        input=script,
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
        check=False,
    )


def test_statements_span_lines_and_errors_do_not_end_the_shell(app: App) -> None:
    result = shell(
        "SELECT id, name\n  FROM main.products\n  WHERE id < 3\n  ORDER BY id;\n"
        "SELECT * FROM main.nothing;\n"
        "SELECT COUNT(*) AS n FROM main.orders; SELECT CAST(NULL AS INT) AS empty;\n"
        ".tables\n"
        "exit\n"
        "SELECT 'after exit' AS never;\n"
    )
    assert result.returncode == 1, result.stderr  # a statement failed: a script must know
    lines = result.stdout.splitlines()
    assert any(line.split() == ["│", "1", "│", "row", "1", "│"] for line in lines), result.stdout
    assert any(line.split() == ["│", "2", "│", "row", "2", "│"] for line in lines)
    assert not any("row 3" in line for line in lines)
    assert any(line.split() == ["│", "2", "│"] for line in lines)  # COUNT(*) of orders
    assert any(line.split() == ["│", "NULL", "│"] for line in lines)
    assert "main.orders" in lines and "main.products" in lines  # .tables
    assert "never" not in result.stdout
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert errors == [
        "gluon: error: the query failed: Table not found: [TABLE_OR_VIEW_NOT_FOUND] "
        "Table or view not found: nothing"
    ]
    assert "Traceback" not in result.stderr
    assert "(2 rows)" in result.stderr  # counts are not results: stderr


def test_json_and_csv_modes(app: App) -> None:
    as_json = shell(
        "SELECT id FROM main.products ORDER BY id;\n"
        "SELECT CAST('NaN' AS DOUBLE) AS x, CAST('-Infinity' AS DOUBLE) AS y;\n",
        "--json",
    )
    assert as_json.returncode == 0, as_json.stderr

    def refuse(token: str) -> None:
        raise ValueError(token)

    documents = [json.loads(line, parse_constant=refuse) for line in as_json.stdout.splitlines()]
    assert documents == [[{"id": 1}, {"id": 2}, {"id": 3}], [{"x": "NaN", "y": "-Infinity"}]]

    as_csv = shell("SELECT id, name FROM main.orders ORDER BY id;\n", "--csv")
    assert as_csv.returncode == 0, as_csv.stderr
    assert as_csv.stdout.splitlines() == ["id,name", "1,row 1", "2,row 2"]


def test_dot_commands_and_mode_switch(app: App) -> None:
    result = shell(".help\n.mode csv\nSELECT 7 AS seven;\n.mode nonsense\n")
    assert result.returncode == 1  # the unknown mode
    assert ".tables" in result.stdout
    assert result.stdout.splitlines()[-2:] == ["seven", "7"]
    assert result.stderr.splitlines()[-1].startswith("gluon: error: unknown command '.mode")


def test_shell_help_and_refused_options(run_cli: RunCli, offload_home: Path) -> None:
    result = run_cli("gluon", "shell", "--help")
    assert result.exit_code == 0, result.stderr
    for option in ("--json", "--csv", "-v", "--debug", "';'"):
        assert option in result.stdout
    both = run_cli("gluon", "shell", "--json", "--csv")
    assert both.exit_code == 2
    assert both.stderr.splitlines() == [
        "gluon: error: --json and --csv exclude each other: choose one"
    ]


def test_at_a_terminal_the_shell_prompts_and_keeps_a_history(app: App, offload_home: Path) -> None:
    """Line editing needs a terminal: the shell runs on a pseudo-terminal, like a person's."""
    controller, terminal = os.openpty()
    process = subprocess.Popen(
        [sys.executable, "-c", "from gluon.cli.app import main; main()", "shell"],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env=dict(os.environ),
        close_fds=True,
    )
    os.close(terminal)
    os.write(controller, b"SELECT 41 + 1\n AS answer;\nexit\n")
    output = b""
    while True:
        ready, _, _ = select.select([controller], [], [], 300)
        if not ready:
            process.kill()
            pytest.fail(f"the shell did not end: {output.decode(errors='replace')}")
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the terminal closed with the shell
            break
        if not chunk:
            break
        output += chunk
    os.close(controller)
    assert process.wait(timeout=60) == 0
    text = output.decode("utf-8", errors="replace")
    assert "gluon> " in text and "   ...> " in text  # the prompt, then the continuation
    assert "answer" in text and "42" in text
    history = offload_home / "shell_history"
    assert history.read_text(encoding="utf-8").splitlines() == [
        "SELECT 41 + 1",
        " AS answer;",
        "exit",
    ]
    assert history.stat().st_mode & 0o777 == 0o600


ENDLESS = "SELECT COUNT(*) AS never FROM range(0, 100000000000000) WHERE id % 7 = 3;"
"""A statement that would run for days: only Ctrl-C ends it. (Not a CROSS JOIN: Sail 0.7
cannot stop one of those between batches, it keeps a core busy until it ends.)"""


def test_ctrl_c_cancels_the_running_statement_and_the_line_typed(app: App) -> None:
    """At a terminal, Ctrl-C cancels the statement the engine runs, or drops the one being
    typed, and the session goes on; Ctrl-D leaves. Before the fix, Ctrl-C ended the shell
    during a statement, and while typing it stopped the embedded engine too (Sail's own SIGINT
    handler): the next statement hung for minutes."""
    # Keys are sent at the prompt, as a person does: typed ahead, a Ctrl-C would also
    # discard what the terminal holds for the program (its input queue is flushed).
    with Terminal.gluon(["shell"]) as terminal:
        terminal.expect("gluon> ")
        terminal.send(ENDLESS + "\n")
        terminal.expect(ENDLESS)  # echoed: the statement is sent
        time.sleep(2)  # let the engine start on it (the test holds if it has not yet)
        terminal.send("\x03")
        cancelled = terminal.expect("gluon> ")
        assert "gluon: statement cancelled" in cancelled and "│" not in cancelled
        terminal.send("SELECT id, name FROM main.products WHERE id = 2;\n")
        assert "row 2" in terminal.expect("(1 row)")
        terminal.expect("gluon> ")
        terminal.send("SELECT 'dropped'\n")  # an unfinished statement ...
        terminal.expect("   ...> ")
        terminal.send("  AS gone")
        terminal.expect("AS gone")  # echoed by readline: it reads keys
        # CPython's readline sees a signal only while it waits for a key: one that comes
        # just before (quicker than a person's hands) counts at the next key instead.
        time.sleep(0.5)
        terminal.send("\x03")  # ... dropped
        terminal.expect("gluon> ")
        terminal.send("SELECT 6 * 7 AS answer;\n")
        answered = terminal.expect("(1 row)")
        assert "42" in answered and "dropped" not in answered
        terminal.expect("gluon> ")
        terminal.send("\x04")
        assert terminal.exit_code() == 0
    assert "Traceback" not in terminal.output
