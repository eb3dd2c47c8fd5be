"""What a failure of the Delta library means, in one line an operator can act on.

deltalake reports storage failures as a chain (``Kernel error -> Operation not supported``,
then indented ``↳`` causes, with terminal colours); the cause that matters (no credentials,
a full disk) is deep in it. These functions find it and say what to do.
"""

from __future__ import annotations

import re

_COLOURS = re.compile(r"\x1b\[[0-9;]*m")
_CREDENTIALS = re.compile(
    r"(?i)loading credentials|IMDS|no credentials|credentials? (?:not found|provider)"
    r"|InvalidAccessKeyId|SignatureDoesNotMatch|ExpiredToken|AccessDenied"
)

NO_SPACE = (
    "no space left on device: free space where the lake is (or move OFFLOAD_LAKE_ROOT) "
    "and run the command again"
)
NO_CREDENTIALS = (
    "the object store found no usable credentials: give them in the environment or "
    "conf/offload.env (for S3: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, "
    "and AWS_REGION; for Azure and GCS their usual variables)"
)

NO_BUCKET = (
    "the bucket (or container) does not exist: create it, or fix the bucket in OFFLOAD_LAKE_ROOT"
)
UNREACHABLE = (
    "the object store does not answer (connection refused or no such host): check "
    "AWS_ENDPOINT_URL (or the Azure and GCS endpoint settings) and that the store is running"
)
_NO_BUCKET = re.compile(r"NoSuchBucket|ContainerNotFound|bucket does not exist")
_UNREACHABLE = re.compile(
    r"Connection refused|tcp connect error|dns error|failed to lookup address"
    r"|Name or service not known"
)


def causes(exc: BaseException) -> list[str]:
    """The lines of ``exc``'s message without colours and ``↳`` markers."""
    text = _COLOURS.sub("", str(exc))
    lines = (line.strip().lstrip("↳").strip() for line in text.splitlines())
    return [line for line in lines if line]


def storage_cause(exc: BaseException) -> str | None:
    """The operator's side of a storage failure (full disk, missing credentials, a missing
    bucket, an endpoint that does not answer), if it is one of those."""
    joined = " ".join(causes(exc))
    if "No space left on device" in joined or "os error 28" in joined:
        return NO_SPACE
    if _CREDENTIALS.search(joined):
        return NO_CREDENTIALS
    if _NO_BUCKET.search(joined):
        return NO_BUCKET
    if _UNREACHABLE.search(joined):
        return UNREACHABLE
    return None


def describe(exc: BaseException) -> str:
    """One line for a Delta library failure: the operator's side where known, else the
    chain's first and last lines (the last is usually the root cause)."""
    known = storage_cause(exc)
    if known:
        return known
    lines = causes(exc) or [type(exc).__name__]
    if len(lines) == 1:
        return lines[0][:500]
    return f"{lines[0]}: {lines[-1]}"[:500]


def is_delta_failure(exc: BaseException) -> bool:
    """True for an error raised by the Delta library: its own classes, or an ``OSError`` of
    its storage layer (a ``Kernel error`` or a chain of ``↳`` causes)."""
    from deltalake.exceptions import DeltaError

    if isinstance(exc, DeltaError):
        return True
    text = str(exc)
    return isinstance(exc, OSError) and (text.startswith("Kernel error") or "↳" in text)
