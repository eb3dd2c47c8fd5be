"""A log file per command under ``OFFLOAD_LOGDIR`` (default ``$OFFLOAD_HOME/log``)."""

from __future__ import annotations

import datetime as dt
import logging
import re
from pathlib import Path

from gluon.errors import ConfigError

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_SECRET = re.compile(r"(://[^:/@\s]+:)[^@\s]+@")


class _RedactSecrets(logging.Filter):
    """Never write passwords that appear in URLs."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = _SECRET.sub(r"\1***@", str(record.msg))
        if record.args:
            record.args = tuple(
                _SECRET.sub(r"\1***@", arg) if isinstance(arg, str) else arg
                for arg in (record.args if isinstance(record.args, tuple) else (record.args,))
            )
        return True


def redact(text: str) -> str:
    """``text`` with URL passwords replaced by ``***``."""
    return _SECRET.sub(r"\1***@", text)


def start_command_log(log_dir: Path, command: str, subject: str | None = None) -> Path:
    """Send gluon's log records to a new file for this command; return its path."""
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the log directory {log_dir}: {exc}") from None
    stamp = dt.datetime.now().strftime("%Y%m%d_%H%M%S_%f")
    name = f"{command}_{subject.lower()}_{stamp}.log" if subject else f"{command}_{stamp}.log"
    path = log_dir / name
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.addFilter(_RedactSecrets())
    root = logging.getLogger("gluon")
    for old in [h for h in root.handlers if isinstance(h, logging.FileHandler)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    return path
