"""``$OFFLOAD_HOME/conf/offload.env``: read as bash reads it, or refused.

gluon reads the file itself, and the bin/ wrappers source it with bash; a line the two
would read differently is refused (file and line named) rather than half-understood.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

from gluon.errors import ConfigError

_ASSIGNMENT = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$")

SETTINGS = (
    "OFFLOAD_HOME",
    "OFFLOAD_LAKE_ROOT",
    "OFFLOAD_LOGDIR",
    "GLUON_SOURCE_URL",
    "GLUON_REPO_URL",
    "GLUON_ENGINE",
    "GLUON_SPARK_MASTER",
    "GLUON_DEBUG",
    "GLUON_UMASK",
    "GLUON_SOURCE_CONNECT_TIMEOUT",
    "GLUON_SOURCE_STATEMENT_TIMEOUT",
    "GLUON_SOURCE_LOCK_TIMEOUT",
    "GLUON_PG_LOGICAL_MAX_RETAINED_WAL",
    "ORA_CONN",
    "ORA_APP_USER",
    "ORA_APP_PASS",
    "SPARK_REMOTE",
    # Read by the bin/ wrappers, or by gluon for diagnostics and tests (docs/testing.md).
    "GLUON_VENV",
    "GLUON_RECORD_SQL",
    "GLUON_FAULT",
    "GLUON_PAUSE",
    "GLUON_PAUSE_RELEASE",
    "GLUON_ACK_POLL_SECONDS",
)
"""Every variable gluon or its wrappers read; another name with gluon's prefixes is a typo."""
GLUON_PREFIXES = ("GLUON_", "OFFLOAD_", "ORA_")

OBJECT_STORE_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_")
"""Object-store settings (S3, ADLS, GCS) under their standard names, read by prefix: the
engine and deltalake read them from the process environment, where gluon puts the env
file's (gluon.config.export_object_store). docs/deployment.md lists the usual ones."""


def parse_env_file(path: Path) -> dict[str, str]:
    """Parse a shell-style ``KEY=value`` file (comments, ``export``, quotes).

    The bin/ wrappers source the same file with bash, so a line bash would read otherwise
    (``KEY = value``, an unquoted space, a ``$`` bash would expand) is refused, as is a
    name with gluon's prefixes that gluon does not read (a typo would be ignored).

    Raises:
        ConfigError: naming the file, the line and how to write it.
    """
    values: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"{path}:{number}"
        match = _ASSIGNMENT.match(line)
        if not match:
            raise ConfigError(f"{where}: expected KEY=value, found {stripped!r}")
        key, raw = match.groups()
        if not re.match(r"^\s*(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=", line):
            raise ConfigError(
                f"{where}: write {key}=value without spaces around '=' "
                "(the bin/ wrappers read this file with bash, which runs such a line)"
            )
        _check_shell_value(key, raw, where)
        try:
            words = shlex.split(raw, comments=True)
        except ValueError as exc:
            raise ConfigError(f"{where}: cannot parse the value of {key}: {exc}") from None
        if len(words) > 1:
            raise ConfigError(
                f"{where}: the value of {key} holds a space: quote it ({key}='...'), as bash "
                "(the bin/ wrappers) needs"
            )
        unknown = _unknown_setting(key)
        if unknown:
            raise ConfigError(f"{where}: {unknown}")
        values[key] = " ".join(words)
    return values


def _check_shell_value(key: str, raw: str, where: str) -> None:
    """Refuse a value bash reads differently from gluon: a leading space (bash would run the
    rest as a command), an expansion (``$``, a backquote) outside single quotes, or a ``#``
    inside an unquoted word (a comment for shlex, part of the value for bash)."""
    if raw[:1].isspace() and raw.strip() and not raw.strip().startswith("#"):
        raise ConfigError(
            f"{where}: write {key}=value without spaces around '=' "
            "(the bin/ wrappers read this file with bash, which runs such a line)"
        )
    quote_char = ""
    escaped = False
    for index, char in enumerate(raw):
        if escaped:
            escaped = False
        elif char == "\\" and quote_char != "'":
            escaped = True
        elif quote_char:
            if char == quote_char:
                quote_char = ""
            elif char in "$`" and quote_char == '"':
                break
        elif char in "'\"":
            quote_char = char
        elif char == "#" and (index == 0 or raw[index - 1].isspace()):
            return  # a comment, for bash and shlex alike
        elif char == "#":
            raise ConfigError(
                f"{where}: the value of {key} holds a # inside a word: quote the value "
                f"({key}='...'), which bash and gluon read alike"
            )
        elif char in "$`":
            break
    else:
        return
    raise ConfigError(
        f"{where}: the value of {key} holds a $ or a backquote: gluon does not expand "
        "variables, so write the value out in full (single-quote it if it holds a literal $)"
    )


def _unknown_setting(key: str) -> str | None:
    """What is wrong with ``key`` when it has gluon's prefixes but gluon does not read it."""
    if key in SETTINGS or not key.startswith(GLUON_PREFIXES):
        return None
    nearest = difflib.get_close_matches(key, SETTINGS, n=1, cutoff=0.6)
    hint = f"did you mean {nearest[0]}?" if nearest else "conf/offload.env.template lists them"
    return f"{key} is not a gluon setting: {hint}"


def misspelt_environment(env: Mapping[str, str]) -> tuple[str, ...]:
    """Warnings for environment variables that look like a misspelt setting (the process
    environment holds other programs' variables too, so only close matches count)."""
    found = []
    for key in sorted(env):
        if key in SETTINGS or not key.startswith(GLUON_PREFIXES):
            continue
        nearest = difflib.get_close_matches(key, SETTINGS, n=1, cutoff=0.85)
        if nearest:
            found.append(f"{key} is not a gluon setting and is ignored: did you mean {nearest[0]}?")
    return tuple(found)
