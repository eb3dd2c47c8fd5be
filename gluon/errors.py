"""The error hierarchy. Services raise these; only ``gluon.cli`` turns them into exit codes."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes (docs/operations.md, section 6)."""

    OK = 0
    ERROR = 1
    USAGE = 2
    LOCKED = 3
    INTERRUPTED = 130
    """Stopped by SIGINT (Ctrl-C): 128 + the signal's number, as shells report it."""


class GluonError(Exception):
    """Root of every error gluon reports to a user as one line."""

    exit_code: ExitCode = ExitCode.ERROR
    changes_taken: int = 0
    """An extraction that failed after confirming some batches: the changes it took from the
    source (its run row counts them too), so the service's metric counts them once."""


class UsageError(GluonError):
    """The command line or a setting is malformed."""

    exit_code = ExitCode.USAGE


class ConfigError(UsageError):
    """A setting is missing or malformed; the message names the variable."""


class SourceError(GluonError):
    """The source database refused or failed a request."""


class NotFoundError(GluonError):
    """A table, view or record that the command needs does not exist."""


class UnsupportedError(GluonError):
    """The request is well formed but gluon cannot do it (type, method, dialect)."""


class StateError(GluonError):
    """The table is in a state that does not allow the request (already offloaded, ...)."""


class LakeError(GluonError):
    """The lake engine or storage failed."""


class RepositoryError(GluonError):
    """The repository database failed, or holds what this release cannot use."""


class LockHeldError(GluonError):
    """Another run holds the lock for this table and operation."""

    exit_code = ExitCode.LOCKED


class StepFailedError(GluonError):
    """A named step of a run failed; the run can be resumed."""

    def __init__(self, message: str, *, step: str, run_id: int | None = None) -> None:
        super().__init__(message)
        self.step = step
        self.run_id = run_id
