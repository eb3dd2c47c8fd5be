"""A log file per command under ``OFFLOAD_LOGDIR`` (default ``$OFFLOAD_HOME/log``).

Passwords never reach a log file, the console or an error message: every line goes
through :func:`redact`, which hides the secrets the settings carry (wherever they
appear, whatever carries them: a driver's exception, a DSN, a traceback) and anything
shaped like a credential (``user:password@``, ``user/password@``, ``password=...``,
``token=...``). Log files are readable by their owner only.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
from pathlib import Path
from urllib.parse import quote, quote_plus, unquote

from gluon.errors import ConfigError

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MASK = "***"
_MIN_LITERAL_SECRET = 4
"""Shorter known secrets are only hidden where they have a credential's shape (hiding every
occurrence of a 3-letter word would garble the log)."""

_CREDENTIAL_SHAPES = (
    # scheme://user:password@host (SQLAlchemy URLs; the password ends at the first "@")
    (re.compile(r"(://[^:/@\s]*:)[^@\n]*@"), rf"\g<1>{MASK}@"),
    # user:password@host without a scheme, and Oracle's user/password@host:port/service
    (re.compile(r"((?:^|(?<=[\s'\"(=,]))[\w.$#%+-]+[:/])[^\s@/:'\"]+@"), rf"\g<1>{MASK}@"),
    # password=... / pwd=... / token=... in query strings, DSNs and connect strings
    (
        re.compile(
            r"(?i)([\w.-]*(?:password|passwd|pwd|secret|token|api_?key|ora_app_pass)[\w.-]*"
            r"\s*=\s*)(\"[^\"]*\"|'[^']*'|[^\s&;,)'\"]+)"
        ),
        rf"\g<1>{MASK}",
    ),
    # 'password': '...' in the repr of a mapping of connect arguments
    (
        re.compile(
            r"(?i)(['\"][\w.-]*(?:password|passwd|pwd|secret|token|api_?key)[\w.-]*['\"]"
            r"\s*:\s*)(\"[^\"]*\"|'[^']*')"
        ),
        rf"\g<1>'{MASK}'",
    ),
)

_known_secrets: set[str] = set()

_URL_SECRETS = (
    re.compile(r"://[^:/@\s]*:([^@\n]*)@"),  # SQLAlchemy: the password ends at the first "@"
    re.compile(r"(?:^|[\s'\"])[\w.$#%+-]+/([^\s@/'\"]+)@"),  # Oracle user/password@dsn
    re.compile(
        r"(?i)[\w.-]*(?:password|passwd|pwd|secret|token|api_?key)[\w.-]*=([^&;\s]+)"
    ),  # ?password=..., ;token=... (Spark Connect), key=value DSNs
)


def secrets_of_url(url: str) -> list[str]:
    """The passwords and tokens written in a URL or DSN, in any of the forms gluon accepts."""
    return [match for pattern in _URL_SECRETS for match in pattern.findall(url) if match]


def remember_secret(secret: str | None) -> None:
    """Hide every later occurrence of ``secret`` (and its URL-encoded forms) in output."""
    if not secret or len(secret) < _MIN_LITERAL_SECRET:
        return
    for form in {secret, unquote(secret), quote(secret, safe=""), quote_plus(secret)}:
        if len(form) >= _MIN_LITERAL_SECRET:
            _known_secrets.add(form)


def forget_secrets() -> None:
    """Forget every remembered secret (a process that runs commands for several configurations,
    such as the test suite, starts each one clean)."""
    _known_secrets.clear()


def redact(text: str) -> str:
    """``text`` with every known secret and credential-shaped value replaced by ``***``."""
    for secret in sorted(_known_secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    for pattern, replacement in _CREDENTIAL_SHAPES:
        text = pattern.sub(replacement, text)
    return text


class RedactingFormatter(logging.Formatter):
    """Redacts the whole formatted record: message, arguments and traceback alike."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def _safe_file_part(subject: str) -> str:
    """``subject`` as a file-name part: no separators or odd characters, bounded length."""
    return re.sub(r"[^A-Za-z0-9_$#-]", "_", subject.lower())[:100]


def start_command_log(log_dir: Path, command: str, subject: str | None = None) -> Path:
    """Send gluon's log records to a new file for this command; return its path.

    The file is created mode 0600, and the directory 0700 when gluon creates it: logs hold
    table names, row counts and statements that only the operator should read.
    """
    try:
        if not log_dir.is_dir():
            log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise ConfigError(f"cannot create the log directory {log_dir}: {exc}") from None
    stamp = dt.datetime.now().strftime("%Y%m%d_%H%M%S_%f")
    name = (
        f"{command}_{_safe_file_part(subject)}_{stamp}.log" if subject else f"{command}_{stamp}.log"
    )
    path = log_dir / name
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        os.chmod(path, 0o600)  # an existing file keeps its mode on open
    except OSError as exc:
        raise ConfigError(f"cannot create the log file {path}: {exc}") from None
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(RedactingFormatter(_FORMAT))
    root = logging.getLogger("gluon")
    for old in [h for h in root.handlers if isinstance(h, logging.FileHandler)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    return path
