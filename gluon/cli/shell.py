"""``gluon shell``: an interactive SQL shell over the lake, one engine session for all statements.

Every offloaded table's view is registered once, at start (``gluon.read.catalog``); statements
end with ``;`` and may span lines; dot commands (``.tables``, ``.help``, ``.mode``) are
read at the start of a statement. At a terminal, lines are edited and remembered with the
standard library's readline (history in ``$OFFLOAD_HOME/shell_history``); on a pipe the
shell reads its statements from stdin without prompts, for scripts and tests.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import pyarrow as pa
from rich.markup import escape
from rich.table import Table

from gluon.cli.common import stderr, stdout
from gluon.config import Settings
from gluon.errors import GluonError
from gluon.lake.session import LakeSession
from gluon.logs import redact
from gluon.offload.copy import OFFLOADED
from gluon.read.catalog import lake_session
from gluon.read.query import display_rows, run_statement, split_statements, to_csv, to_json
from gluon.repo import Repository

log = logging.getLogger(__name__)

PROGRAM = "gluon"
MODES = ("table", "json", "csv")
HISTORY_FILE = "shell_history"
HISTORY_LENGTH = 1000
QUIT_WORDS = {"exit", "quit", ".quit", ".exit", "exit;", "quit;"}

HELP = """\
Statements are Spark SQL and end with ';' (they may span lines).
  .tables          list the registered tables and views (also: SHOW VIEWS IN schema;)
  .mode MODE       print results as 'table', 'json' or 'csv'
  .help            this help
  exit, quit, EOF  leave the shell (Ctrl-D)
Ctrl-C cancels the running statement, or drops the one being typed."""


@dataclass
class ShellState:
    """What the shell remembers between statements."""

    mode: str
    views: list[str]
    unavailable: dict[str, str]
    failed: int = 0
    pending: str = ""
    """The statement typed so far (lines without its ending ``;``)."""
    interactive: bool = False
    """At a terminal: Ctrl-C cancels a statement, not the shell."""


def run_shell(settings: Settings, mode: str, interactive: bool) -> int:
    """Read and run statements until EOF or ``exit``; return how many failed."""
    with lake_session(settings) as session:
        state = ShellState(
            mode=mode,
            views=_registered_views(session),
            unavailable=dict(session.unavailable),
            interactive=interactive,
        )
        for view, reason in state.unavailable.items():
            _error(f"{view} is unavailable and was skipped: {reason}", kind="warning")
        if not interactive:
            _loop(session, state, _piped_lines(sys.stdin))
            return state.failed
        history = settings.offload_home / HISTORY_FILE
        save_history = _load_history(history)
        stderr.print(
            f"gluon shell: {len(state.views)} tables and views registered; "
            "statements end with ';', .help for help, exit or Ctrl-D to leave",
            markup=False,
        )
        try:
            _loop(session, state, _terminal_lines(state))
        finally:
            save_history()
    return state.failed


def _loop(session: LakeSession, state: ShellState, lines: Iterator[tuple[str, bool]]) -> None:
    for line, interrupted in lines:
        if interrupted:
            state.pending = ""
            continue
        if not state.pending.strip():
            word = line.strip()
            if word.lower() in QUIT_WORDS:
                return
            if word.startswith("."):
                state.pending = ""
                _dot_command(word, state)
                continue
        statements, state.pending = split_statements(state.pending + line + "\n")
        for statement in statements:
            _run(session, state, statement)
    if state.pending.strip():
        _run(session, state, state.pending.strip())  # a script's last statement may lack ';'


def _run(session: LakeSession, state: ShellState, statement: str) -> None:
    try:
        _run_and_print(session, state, statement)
    except KeyboardInterrupt:
        if not state.interactive:
            raise  # Ctrl-C ends a script
        log.info("statement cancelled (Ctrl-C)")
        session.interrupt()
        stderr.print(f"{PROGRAM}: statement cancelled", markup=False)


def _run_and_print(session: LakeSession, state: ShellState, statement: str) -> None:
    log.info("statement: %s", redact(statement))
    try:
        table = run_statement(session, statement)
    except GluonError as exc:
        state.failed += 1
        log.error("%s", exc)
        _error(str(exc))
        return
    except Exception as exc:  # one line, the shell goes on; the traceback is in the log
        state.failed += 1
        log.exception("unexpected error")
        first = (str(exc).strip().splitlines() or [""])[0]
        _error(f"unexpected {type(exc).__name__}: {first}")
        return
    _print_result(table, state.mode)


def _print_result(table: pa.Table, mode: str) -> None:
    if mode == "json":
        stdout.print(to_json(table), markup=False, soft_wrap=True)
    elif mode == "csv":
        stdout.print(to_csv(table).rstrip("\n"), markup=False, soft_wrap=True)
    else:
        stdout.print(result_table(table))
        stderr.print(f"({table.num_rows} {'row' if table.num_rows == 1 else 'rows'})")


def result_table(table: pa.Table) -> Table:
    """``table`` as a rich table; NULL shown as such, no markup read from the values."""
    shown = Table(show_lines=False, highlight=False)
    for name in table.column_names:
        shown.add_column(name, overflow="fold")
    for row in display_rows(table):
        shown.add_row(*(escape(text) for text in row))
    return shown


def _dot_command(word: str, state: ShellState) -> None:
    command, _, argument = word.rstrip(";").partition(" ")
    if command == ".tables":
        for view in state.views:
            stdout.print(view, markup=False)
        for view, reason in state.unavailable.items():
            stdout.print(f"{view} (unavailable: {reason})", markup=False)
    elif command == ".mode" and argument.strip() in MODES:
        state.mode = argument.strip()
    elif command == ".help":
        stdout.print(HELP, markup=False)
    else:
        state.failed += 1
        _error(f"unknown command {word!r}: .tables, .mode table|json|csv, .help, exit")


def _error(message: str, kind: str = "error") -> None:
    stderr.print(f"{PROGRAM}: {kind}: {redact(message)}", markup=False)


def _registered_views(session: LakeSession) -> list[str]:
    repo = Repository(session.settings.repo_url)
    return [
        record.user_view
        for record in repo.list_tables()
        if record.status == OFFLOADED and record.user_view not in session.unavailable
    ]


def _piped_lines(stream: TextIO) -> Iterator[tuple[str, bool]]:
    for line in stream:
        yield line.rstrip("\n"), False


def _terminal_lines(state: ShellState) -> Iterator[tuple[str, bool]]:
    """Lines typed at the prompt (``...>`` while a statement is unfinished); Ctrl-C yields
    an interruption, Ctrl-D ends."""
    while True:
        try:
            line = input("   ...> " if state.pending.strip() else "gluon> ")
        except EOFError:
            stderr.print("")
            return
        except KeyboardInterrupt:
            stderr.print("")
            yield "", True
            continue
        yield line, False


def _load_history(path: Path) -> Callable[[], None]:
    """Line editing and a history kept across sessions (where readline is available); returns
    what saves the history at the end."""
    try:
        import readline
    except ImportError:  # Windows without pyreadline: plain input() still works
        return lambda: None
    with suppress(OSError):
        readline.read_history_file(path)
    readline.set_history_length(HISTORY_LENGTH)

    def save() -> None:
        with suppress(OSError):
            readline.write_history_file(path)
            path.chmod(0o600)  # statements can hold literals only the operator should read

    return save
