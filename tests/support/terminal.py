"""A program run on a pseudo-terminal that is its controlling terminal, as at a person's desk.

What the test types reaches the program as keys do: a line is read when Enter is typed, and
Ctrl-C (``\\x03``) makes the terminal send SIGINT to the program's process group, Ctrl-D
(``\\x04``) at the start of a line is EOF. Usage::

    with Terminal(["gluon", "shell"]) as terminal:
        terminal.expect("gluon> ")
        terminal.send("SELECT 1;\\n")
        terminal.expect("1")
        terminal.send("\\x04")
        assert terminal.exit_code() == 0

Every wait has a limit, a guard against a hang only (a test fails with the output so far):
never a measure of speed.
"""

from __future__ import annotations

import codecs
import os
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from types import TracebackType

GUARD_SECONDS = 300.0

# The child is a session leader (start_new_session) without a controlling terminal; opening
# its terminal by name makes that terminal its controlling one, the foreground process group
# its own: as a login shell's child, Ctrl-C then reaches it as SIGINT.
_TAKE_TERMINAL = "import os; os.close(os.open(os.ttyname(0), os.O_RDWR)); "


class Terminal:
    """``python -c CODE`` (``code``: what runs after the terminal is taken) on a new
    pseudo-terminal; ``output`` holds everything it wrote, echoed keys included."""

    def __init__(self, code: str, env: dict[str, str] | None = None) -> None:
        self.output = ""
        self._read_to = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._controller, terminal = os.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _TAKE_TERMINAL + code],
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            env=dict(os.environ) if env is None else env,
            start_new_session=True,
            close_fds=True,
        )
        os.close(terminal)
        self._closed = False

    @classmethod
    def gluon(cls, arguments: Sequence[str]) -> Terminal:
        """The ``gluon`` program with ``arguments``."""
        return cls(
            f"import sys; sys.argv[1:] = {list(arguments)!r}; "
            "from gluon.cli.app import main; main()"
        )

    def send(self, keys: str) -> None:
        os.write(self._controller, keys.encode("utf-8"))

    def expect(self, text: str, guard: float = GUARD_SECONDS) -> str:
        """Wait until ``text`` appears after what earlier calls consumed; return the output up
        to and including it (and consume that)."""
        deadline = time.monotonic() + guard
        while True:
            found = self.output.find(text, self._read_to)
            if found >= 0:
                seen = self.output[self._read_to : found + len(text)]
                self._read_to = found + len(text)
                return seen
            if not self._read(deadline - time.monotonic()):
                self.kill()
                raise AssertionError(
                    f"{text!r} did not appear (the program {self._state()}); "
                    f"output after the last match:\n{self.output[self._read_to :]}"
                )

    def exit_code(self, guard: float = GUARD_SECONDS) -> int:
        """Read until the program closes the terminal; its exit code."""
        deadline = time.monotonic() + guard
        while self._read(deadline - time.monotonic()):
            pass
        if self._closed:
            try:
                return self.process.wait(timeout=max(deadline - time.monotonic(), 1.0))
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        raise AssertionError(
            f"the program did not end; output after the last match:\n{self.output[self._read_to :]}"
        )

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, 9)
            self.process.wait()

    def _read(self, wait: float) -> bool:
        """Read what is there within ``wait`` seconds; False when nothing came or the
        program closed the terminal."""
        if self._closed or wait <= 0:
            return False
        ready, _, _ = select.select([self._controller], [], [], wait)
        if not ready:
            return False
        try:
            chunk = os.read(self._controller, 4096)
        except OSError:  # EIO: every holder of the terminal closed it (the program ended)
            chunk = b""
        if not chunk:
            self._closed = True
            return False
        self.output += self._decoder.decode(chunk)  # a character may span two reads
        return True

    def _state(self) -> str:
        code = self.process.poll()
        return "is still running" if code is None else f"ended with exit code {code}"

    def __enter__(self) -> Terminal:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.kill()
        os.close(self._controller)
