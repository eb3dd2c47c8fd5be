"""What every command shares: settings, the log file, progress bars, error handling."""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer

from gluon.config import Settings, export_object_store, load_settings
from gluon.errors import ExitCode, GluonError
from gluon.logs import RedactingFormatter, redact, start_command_log
from gluon.progress import NullProgress, ProgressTask

if TYPE_CHECKING:
    from rich.console import Console

T = TypeVar("T")


class LazyConsole:
    """A rich ``Console`` on stdout or stderr, made when first used.

    Importing rich costs about 0.035 s of CPU at every start; a command that prints only
    plain lines (``say``), such as a no-op extraction, does not pay it (issue 14).
    """

    def __init__(self, *, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._stderr, highlight=False, soft_wrap=True)
        return self._console

    def print(self, *objects: Any, **options: Any) -> None:
        self.console.print(*objects, **options)

    @property
    def is_terminal(self) -> bool:
        # Not a terminal and nothing forcing one (rich's own rules, TTY_COMPATIBLE and
        # FORCE_COLOR): answered without importing rich, which costs a cron-run extraction
        # about 0.1 s of start-up (issue 28).
        if self._console is None and not _may_be_terminal(
            sys.stderr if self._stderr else sys.stdout
        ):
            return False
        return self.console.is_terminal


def _may_be_terminal(stream: Any) -> bool:
    """Whether rich could call ``stream`` a terminal: it is a tty, or the environment says
    to treat it as one (or as not one: rich decides then)."""
    if "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ:
        return True
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except ValueError:  # a closed stream
        return False


stdout = LazyConsole(stderr=False)
stderr = LazyConsole(stderr=True)


def say(text: str, *, err: bool = False) -> None:
    """Print one plain line without rich, as ``stdout.print(text, markup=False, emoji=False)``
    would (no highlighting, no wrapping) but with the text as it is (rich expands tabs and
    drops some control characters), and at no import cost."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


# Until a command's log file is open, records go nowhere (not to Python's last-resort
# handler, which would print an error a second time next to the one-line message).
logging.getLogger("gluon").addHandler(logging.NullHandler())


class RichProgress:
    """Progress bars on stderr (only on a terminal)."""

    def task(self, description: str, total: int | None) -> AbstractContextManager[ProgressTask]:
        return self._task(description, total)

    @contextmanager
    def _task(self, description: str, total: int | None) -> Iterator[ProgressTask]:
        # Asked here, when there is work to show, not when the command starts: the question
        # makes the console, and so imports rich.
        if not stderr.is_terminal:
            with NullProgress().task(description, total) as task:
                yield task
            return
        # Imported when a bar is shown (at a terminal, with work to do), not at every start.
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=stderr.console, transient=True) as bars:
            task_id = bars.add_task(description, total=total)

            class _Task:
                def advance(self, amount: int) -> None:
                    bars.advance(task_id, amount)

            yield _Task()


def progress_for(quiet: bool) -> RichProgress | NullProgress:
    """Bars for people at a terminal; nothing for scripts and cron (``RichProgress`` checks
    for the terminal when a task starts)."""
    return NullProgress() if quiet else RichProgress()


def _console_logging(verbose: bool) -> None:
    root = logging.getLogger("gluon")
    for handler in [h for h in root.handlers if getattr(h, "_gluon_console", False)]:
        root.removeHandler(handler)
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(RedactingFormatter("%(asctime)s %(message)s", "%H:%M:%S"))
        handler.setLevel(logging.INFO)
        handler._gluon_console = True  # type: ignore[attr-defined]
        root.addHandler(handler)


def fail(message: str, code: ExitCode = ExitCode.ERROR, *, program: str) -> NoReturn:
    stderr.print(f"{program}: error: {redact(message)}", markup=False)
    raise typer.Exit(int(code))


def _detach_command_handlers() -> None:
    root = logging.getLogger("gluon")
    for handler in [
        h
        for h in root.handlers
        if isinstance(h, logging.FileHandler) or getattr(h, "_gluon_console", False)
    ]:
        root.removeHandler(handler)
        handler.close()


def quiet_broken_pipe() -> None:
    """stdout's reader is gone (``| head``, a ``tee`` ended by Ctrl-C): send the rest of the
    output nowhere, as Python's documentation recommends, so no traceback follows at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # a stdout with no file descriptor (a test's runner)
        pass
    finally:
        os.close(devnull)


def _unexpected_message(exc: Exception) -> str | None:
    """One actionable line for an unexpected error whose cause is known (the lake's storage),
    else None."""
    from gluon.lake import failures

    if failures.is_delta_failure(exc):
        return f"the lake's storage failed: {failures.describe(exc)}"
    return None


def _print_traceback() -> None:
    """``--debug``: the traceback on stderr, with secrets hidden like everywhere else."""
    print(redact(traceback.format_exc()), end="", file=sys.stderr)


def run_command(
    program: str,
    body: Callable[[Settings], T],
    *,
    subject: str | None = None,
    validate: Callable[[], object] | None = None,
    verbose: bool = False,
    debug: bool = False,
) -> tuple[T, Path | None]:
    """Load settings, open the log file, run ``body``; errors become one line and an exit code.

    ``validate`` checks the input the log file is named from (``subject``) before the file
    is created, so bad input leaves no file behind.
    """
    debug = debug or bool(os.environ.get("GLUON_DEBUG"))
    log_path: Path | None = None
    # The Delta and object-store libraries log warnings on stderr (an absent cloud metadata
    # service...): the one-line error says what matters, the rest would bury it.
    os.environ.setdefault("RUST_LOG", "error")
    umask: int | None = None
    _detach_command_handlers()  # an earlier command in this process must not get our records
    try:
        if validate is not None:
            validate()
        settings = load_settings()
        export_object_store(settings)
        # Set before the first write (the log) and undone at the end, for a test's process.
        umask = os.umask(settings.umask)
        for warning in settings.warnings:
            say(f"{program}: warning: {redact(warning)}", err=True)
        log_path = start_command_log(settings.log_dir, program, subject)
        _console_logging(verbose)
        logging.getLogger("gluon").info("%s %s", program, redact(" ".join(sys.argv[1:])))
        started = time.monotonic()
        outcome = body(settings)
        logging.getLogger("gluon").info("%s done in %.3fs", program, time.monotonic() - started)
        return outcome, log_path
    except GluonError as exc:
        logging.getLogger("gluon").error("%s", exc)
        if debug:
            _print_traceback()
        fail(str(exc), exc.exit_code, program=program)
    except KeyboardInterrupt:
        fail("interrupted", ExitCode.INTERRUPTED, program=program)
    except BrokenPipeError:
        quiet_broken_pipe()
        logging.getLogger("gluon").warning("stdout was closed by its reader: stopped")
        raise typer.Exit(int(ExitCode.ERROR)) from None
    except Exception as exc:  # the last resort: one line, the traceback in the log
        logging.getLogger("gluon").exception("unexpected error")
        if debug:
            _print_traceback()
        where = f" (details in {log_path})" if log_path else ""
        known = _unexpected_message(exc)
        if known:
            fail(f"{known}{where}", ExitCode.ERROR, program=program)
        first_line = (str(exc).strip().splitlines() or [""])[0]
        fail(
            f"unexpected {type(exc).__name__}: {first_line}{where}", ExitCode.ERROR, program=program
        )
    finally:
        if umask is not None:
            os.umask(umask)
