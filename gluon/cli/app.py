"""``gluon``: utility commands (query the lake, ...)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from gluon.cli.common import (
    fail,
    progress_for,
    quiet_broken_pipe,
    run_command,
    stderr,
    stdout,
)
from gluon.cli.options import DebugOption, JsonOption, TableOption, VerboseOption
from gluon.config import Settings
from gluon.errors import ExitCode, LakeError, LockHeldError, SourceError, UsageError
from gluon.locks import unlock as unlock_table
from gluon.logs import redact
from gluon.naming import TableRef
from gluon.read.export import DIALECT_NAMES, check_dialect, export_views, render_script
from gluon.read.query import run_query, to_csv, to_json, to_text
from gluon.repo import OffloadedTable, Repository

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None)

PROGRAM = "gluon"
DEFAULT_LOCK_WAIT_SECONDS = 30.0
"""How long ``gluon verify`` waits for a running extraction of the table (they take
seconds) before it reports the table locked."""


@app.callback()
def callback() -> None:
    """gluon utility commands."""


@app.command(help="Run Spark SQL against the lake with the gluon views it names registered.")
def query(
    statement: Annotated[str, typer.Argument(help='The SQL, e.g. "SELECT * FROM sh.products".')],
    json_output: JsonOption = False,
    csv_output: Annotated[bool, typer.Option("--csv", help="Print CSV with a header row.")] = False,
    verbose: VerboseOption = False,
    debug: DebugOption = False,
) -> None:
    def body(settings: Settings) -> str:
        table = run_query(settings, statement, warn=_warn)
        if json_output:
            return to_json(table)
        if csv_output:
            return to_csv(table)
        return to_text(table)

    text, _ = run_command(PROGRAM, body, subject="query", verbose=verbose, debug=debug)
    stdout.print(text.rstrip("\n"), markup=False)  # CSV ends with a newline: print adds one


@app.command(
    help=(
        "An interactive SQL shell over the lake: one engine session with every offloaded "
        "table and view registered; statements end with ';' (.help lists the dot commands). "
        "Reads stdin without prompts when it is not a terminal."
    )
)
def shell(
    json_output: Annotated[
        bool, typer.Option("--json", help="Print each result as a JSON array.")
    ] = False,
    csv_output: Annotated[
        bool, typer.Option("--csv", help="Print each result as CSV with a header row.")
    ] = False,
    verbose: VerboseOption = False,
    debug: DebugOption = False,
) -> None:
    from gluon.cli.shell import run_shell

    if json_output and csv_output:
        fail("--json and --csv exclude each other: choose one", ExitCode.USAGE, program=PROGRAM)
    mode = "json" if json_output else "csv" if csv_output else "table"
    interactive = sys.stdin.isatty()

    def body(settings: Settings) -> int:
        return run_shell(settings, mode, interactive)

    failed, _ = run_command(PROGRAM, body, subject="shell", verbose=verbose, debug=debug)
    if failed and not interactive:
        raise typer.Exit(int(ExitCode.ERROR))  # a script learns that a statement failed


def _warn(message: str) -> None:
    logging.getLogger("gluon.read.query").warning(message)
    stderr.print(f"{PROGRAM}: warning: {redact(message)}", markup=False)


@app.command(
    help=(
        "Print view definitions of tables' merged latest state for another engine, over the "
        "Delta folders (export again after each compaction)."
    )
)
def views(
    table: Annotated[
        str | None,
        typer.Option("-t", "--table", help="The table as SCHEMA.TABLE.", show_default=False),
    ] = None,
    all_tables: Annotated[bool, typer.Option("--all", help="Every offloaded table.")] = False,
    dialect: Annotated[
        str, typer.Option("--dialect", help=f"One of {', '.join(DIALECT_NAMES)}.")
    ] = "spark",
    verbose: VerboseOption = False,
    debug: DebugOption = False,
) -> None:
    def validate() -> None:
        if (table is None) == (not all_tables):
            raise UsageError("give -t SCHEMA.TABLE or --all (one of them)")
        check_dialect(dialect)

    def body(settings: Settings) -> str:
        repo = Repository(settings.repo_url)
        exported = export_views(repo, dialect, None if all_tables else [str(table)])
        return render_script(exported, dialect)

    text, _ = run_command(
        PROGRAM, body, subject="views", validate=validate, verbose=verbose, debug=debug
    )
    stdout.print(text, markup=False)


@app.command(
    help=(
        "Clear the repository's lock records of a table left by a command that died on "
        "another node (refused while the holder is alive on this node)."
    )
)
def unlock(table: TableOption, verbose: VerboseOption = False, debug: DebugOption = False) -> None:
    def body(settings: Settings) -> str:
        key = TableRef.parse(table).key
        cleared = unlock_table(Repository(settings.repo_url), key)
        if not cleared:
            return f"{key} has no lock records: nothing to clear"
        return "\n".join(f"{key}: cleared the {what}" for what in cleared)

    text, _ = run_command(PROGRAM, body, subject="unlock", verbose=verbose, debug=debug)
    stdout.print(text, markup=False)


@app.command(
    help=(
        "Compare an offloaded table in the lake with its source, key by key, after an "
        "extraction; exit 0 equal, 1 differences, 2 usage, 3 locked (--all goes on past "
        "a locked table; 1 outranks 3)."
    )
)
def verify(
    table: Annotated[
        str | None,
        typer.Option("-t", "--table", help="The table to verify (SCHEMA.TABLE).", metavar="TEXT"),
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Verify every offloaded table.")] = False,
    repair_keys: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Re-ship the differing keys as changes through the capture, then verify again.",
        ),
    ] = False,
    max_rows_per_second: Annotated[
        int | None,
        typer.Option(
            "--max-rows-per-second",
            min=1,
            help="Read the source no faster than this (the application keeps its share).",
        ),
    ] = None,
    lock_wait: Annotated[
        float,
        typer.Option(
            "--lock-wait",
            min=0,
            metavar="SECONDS",
            help="While another command holds a table's extraction lock, try again for up to "
            "this long before reporting it locked.",
        ),
    ] = DEFAULT_LOCK_WAIT_SECONDS,
    json_output: JsonOption = False,
    verbose: VerboseOption = False,
    debug: DebugOption = False,
) -> None:
    from gluon.verify.render import as_json, line
    from gluon.verify.repair import check_repairable, repair
    from gluon.verify.run import (
        Verdict,
        check_selection,
        exit_code,
        tables_to_verify,
        verify_table,
    )

    def body(settings: Settings) -> list[Verdict]:
        repo = Repository(settings.repo_url)
        records = tables_to_verify(repo, table, every)
        if repair_keys:
            for record in records:
                check_repairable(repo, record)  # before anything runs
        verdicts = []
        bars = progress_for(quiet=json_output)  # a bar only at a terminal, never with --json

        def verify_one(record: OffloadedTable) -> Verdict:
            verdict = verify_table(settings, repo, record, max_rows_per_second, lock_wait, bars)
            if repair_keys and not verdict.equal:
                if not json_output:
                    stdout.print(line(verdict), markup=False)
                shipped = repair(settings, repo, record, verdict)
                logging.getLogger("gluon.verify").info("re-shipped %d keys", shipped)
                if not json_output:
                    stdout.print(
                        f"{record.table_key}: re-shipped {shipped} keys through the capture; "
                        "verifying again",
                        markup=False,
                    )
                verdict = verify_table(settings, repo, record, max_rows_per_second, lock_wait, bars)
            return verdict

        for record in records:
            try:
                verdict = verify_one(record)
            except LockHeldError as exc:
                if not every:
                    raise
                # --all goes on: one busy table must not hide the others' results.
                logging.getLogger("gluon.verify").warning("%s", exc)
                verdict = Verdict(record.table_key, locked=str(exc))
            except (LakeError, SourceError) as exc:
                if not every:
                    raise
                # --all goes on past a table it cannot read (a lake file gone, a source
                # table dropped): the others' results still count.
                logging.getLogger("gluon.verify").error("%s", exc)
                verdict = Verdict(record.table_key, failed=str(exc))
            if not json_output:
                stdout.print(line(verdict), markup=False)
            verdicts.append(verdict)
        return verdicts

    verdicts, _ = run_command(
        PROGRAM,
        body,
        subject="verify",
        validate=lambda: check_selection(table, every),
        verbose=verbose,
        debug=debug,
    )
    if json_output:
        stdout.print(as_json(verdicts), markup=False)
    code = exit_code(verdicts)
    if code != ExitCode.OK:
        raise typer.Exit(int(code))


@app.command(
    help=(
        "Run the due extractions and compactions of the tables a TOML file declares, a few at "
        "a time in one process, until SIGTERM or SIGINT (docs/operations.md, the service)."
    )
)
def service(
    config: Annotated[
        Path, typer.Option("--config", help="The tables file, e.g. conf/tables.toml.")
    ],
    parallel: Annotated[
        int | None,
        typer.Option(
            "--parallel", help="Runs at a time (default: the file's [service] parallel, else 2)."
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option("--metrics-port", help="Serve Prometheus metrics on this port."),
    ] = None,
    metrics_address: Annotated[
        str,
        typer.Option(
            "--metrics-address",
            help="The address the metrics port listens on (0.0.0.0: every interface).",
        ),
    ] = "127.0.0.1",
    continuous: Annotated[
        bool,
        typer.Option(
            "--continuous",
            help="Extract every table of the file as its changes commit (as continuous = true).",
        ),
    ] = False,
    verbose: VerboseOption = False,
    debug: DebugOption = False,
) -> None:
    from gluon.service.config import ServiceConfig, all_continuous, load_config

    loaded: list[ServiceConfig] = []

    def validate() -> None:
        if parallel is not None and parallel < 1:
            raise UsageError(f"--parallel must be at least 1, found {parallel}")
        if metrics_port is not None and not 1 <= metrics_port <= 65535:
            raise UsageError(f"--metrics-port must be between 1 and 65535, found {metrics_port}")
        read = load_config(config)
        loaded.append(all_continuous(read) if continuous else read)

    def body(settings: Settings) -> str:
        from gluon.service.metrics import ServiceMetrics
        from gluon.service.runner import Service, check_tables

        tables = loaded[0]
        check_tables(settings, tables)
        metrics = None
        if metrics_port is not None:
            metrics = ServiceMetrics()
            metrics.serve(metrics_port, metrics_address)
        workers = parallel or tables.parallel
        # Before the first line: whoever reads it may stop the service at once.
        previous = {
            number: signal.signal(number, _stop_handler(stop, stopped_by))
            for number in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            _say(
                f"{PROGRAM} service: {len(tables.tables)} tables from {config}, {workers} runs "
                "at a time"
                + (f", metrics on {metrics_address}:{metrics_port}" if metrics_port else "")
                + f"; log {_log_file()}"
            )
            runner = Service(settings, tables, parallel=workers, metrics=metrics, announce=_say)
            totals = runner.run(stop)
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
            if metrics is not None:
                metrics.close()
        return (
            f"{PROGRAM} service: stopped after {totals.runs} runs ({totals.failures} failed, "
            f"{totals.skipped} skipped for a lock held, {totals.shipped} changes shipped)"
        )

    stop = threading.Event()
    stopped_by: list[int] = []
    text, _ = run_command(
        PROGRAM, body, subject="service", validate=validate, verbose=verbose, debug=debug
    )
    _say(text)
    if signal.SIGINT in stopped_by:  # Ctrl-C: the shell's convention, 128 + SIGINT
        raise typer.Exit(int(ExitCode.INTERRUPTED))


_say_lock = threading.Lock()


def _say(line: str) -> None:
    """One line on stdout at once (a journal or a pipe reads it while the service runs).

    A reader that went away (``| tee`` ended by Ctrl-C) does not stop the service: its
    lines are in the log.
    """
    with _say_lock:
        try:
            print(redact(line), flush=True)
        except BrokenPipeError:
            quiet_broken_pipe()


def _log_file() -> str:
    handlers = logging.getLogger("gluon").handlers
    files = [h.baseFilename for h in handlers if isinstance(h, logging.FileHandler)]
    return files[0] if files else "(none)"


def _stop_handler(
    stop: threading.Event, stopped_by: list[int]
) -> Callable[[int, FrameType | None], None]:
    def handle(number: int, frame: FrameType | None) -> None:
        name = signal.Signals(number).name
        stopped_by.append(number)
        if stop.is_set():
            # A second signal: end now. Every write path survives that; the next start resumes.
            logging.getLogger("gluon").warning("%s again: exiting without waiting", name)
            with contextlib.suppress(OSError):
                print(f"{PROGRAM} service: {name} again: exiting at once", file=sys.stderr)
            os._exit(int(ExitCode.ERROR))
        logging.getLogger("gluon").info("%s: stopping (no new runs)", name)
        _say(f"{PROGRAM} service: {name}: stopping; running runs finish their current commit")
        stop.set()

    return handle


def main() -> None:
    app(prog_name=PROGRAM)
