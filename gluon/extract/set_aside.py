"""Setting aside changes the lake cannot take (--incremental-set-aside-changes=GL_SEQ,...).

An extraction that reads a change whose value its column's lake type cannot hold names it
(``gluon.extract.feeds.unfit``) and stops: nothing of the batch ships. This command moves exactly
the named changes out of what waits into the repository (``gluon.repo.set_aside``), so the
changes after them ship again. It refuses a ``gl_seq`` that does not wait (unless it is
already set aside) and a change the lake can take: setting aside never drops a change that
could ship. The table's feed finds the changes and takes them out (``find_unfit``,
``set_aside``): a changelog deletes them, a replication slot skips recorded changes at every
read (the next extraction confirms the slot past them).

Crash safety: the repository record comes first (idempotent by ``gl_seq``), then one
changelog delete of exactly those ``gl_seq`` values. A kill between the two leaves the change
recorded and still waiting; running the same command again records nothing twice and
deletes it. Holding the table's lifecycle lock (which takes the extraction lock too), no
extraction reads the changes meanwhile.

What the lake shows for the key afterwards: a later change of the same key carries the whole
new row (or its delete), so once it ships the lake is exact again for that key. Without one,
the lake keeps the key's previous state (an insert set aside: no row) until the row changes
in the source again; status and the report show the record until then.
"""

from __future__ import annotations

import getpass
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from gluon import source as sources
from gluon.config import Settings
from gluon.errors import StateError, UsageError
from gluon.extract.feeds import ChangeFeed, feed_of
from gluon.extract.feeds.unfit import SET_ASIDE_OPTION, UnfitChange, UnfitSearch
from gluon.locks import lifecycle_lock
from gluon.naming import TableRef
from gluon.progress import ShownLine, plan_lines, sentence
from gluon.repo import OffloadedTable, Repository
from gluon.repo.common import now
from gluon.repo.incremental import IncrementalState
from gluon.repo.set_aside import SetAsideChange
from gluon.source.base import SourceDialect

log = logging.getLogger(__name__)


def parse_seqs(text: str) -> list[int]:
    """``"12,15"`` -> ``[12, 15]``.

    Raises:
        UsageError: not a comma-separated list of positive integers.
    """
    seqs: list[int] = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) <= 0:
            raise UsageError(
                f"{SET_ASIDE_OPTION}={text}: give the gl_seq values of the changes to set "
                "aside, separated by commas (as the extraction's error line names them)"
            )
        seqs.append(int(item))
    return sorted(set(seqs))


@dataclass(slots=True)
class SetAsideResult:
    table_key: str
    executed: bool
    steps: list[str] = field(default_factory=list)
    message: str = ""
    changes: list[UnfitChange] = field(default_factory=list)

    def shown(self) -> list[ShownLine]:
        return [sentence(self.message)] if self.executed else plan_lines(self.table_key, self.steps)


def _enabled(repo: Repository, key: str) -> tuple[OffloadedTable, IncrementalState]:
    record, state = repo.enabled_table(key, otherwise="no changes to set aside")
    if state.enablement_id is None:  # pragma: no cover - every enabling since 0006 has one
        raise StateError(f"{key} has no enablement recorded: enable it again")
    return record, state


def _feed(
    source: SourceDialect, record: OffloadedTable, state: IncrementalState, repo: Repository
) -> ChangeFeed:
    return feed_of(state)(source, record, state, repo)


def _unfit_changes(
    feed: ChangeFeed, key: str, seqs: Sequence[int], already: set[int]
) -> UnfitSearch:
    """The changes of ``seqs`` waiting, each with the column the lake refuses.

    Raises:
        UsageError: a ``gl_seq`` waits nowhere (and was not set aside), or its change fits.
    """
    # Those recorded already are searched too: a kill between the record and the changelog
    # delete leaves them waiting, and this run takes them out.
    search = feed.find_unfit(sorted(set(seqs)), already)
    unknown = [seq for seq in seqs if seq not in search.rows and seq not in already]
    if unknown:
        raise UsageError(
            f"no change with gl_seq {', '.join(map(str, unknown))} waits in {feed.waits_in} "
            f"of {key}: name the gl_seq values the extraction's error line gives (nothing was "
            "set aside)"
        )
    if search.fitting:
        raise UsageError(
            f"the lake can take change gl_seq {', '.join(map(str, search.fitting))} of "
            f"{key}: it ships with the next extraction, only a change the extraction refuses "
            "can be set aside (nothing was set aside)"
        )
    return search


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name for this uid (a container)
        return "unknown"


def set_aside_changes(
    settings: Settings, ref: TableRef, seqs: Sequence[int], *, execute: bool
) -> SetAsideResult:
    """Move the changes ``seqs`` of ``ref`` out of its changelog into the repository.

    Raises:
        StateError: not enabled.
        UnsupportedError: the method keeps no changelog.
        UsageError: a ``gl_seq`` does not wait in the changelog, or its change fits the lake.
        LockHeldError: another command on the table is running.
    """
    repo = Repository(settings.repo_url)
    key = ref.key
    record, state = _enabled(repo, key)
    source = sources.connect_configured(settings)
    source.check_connection()
    assert state.enablement_id is not None
    already = repo.set_aside.seqs(key, state.enablement_id) & set(seqs)
    search = _unfit_changes(_feed(source, record, state, repo), key, seqs, already)
    changes, already = search.unfit, already - set(search.rows)
    result = SetAsideResult(key, execute, changes=changes)
    result.steps = [f"record change {change.label()} in the repository" for change in changes]
    if changes:
        result.steps.append(f"take change(s) {_listed(changes)} out of {_feed_of(state)}")
    if already:
        result.steps.append(f"gl_seq {', '.join(map(str, sorted(already)))}: already set aside")
    if not execute:
        return result
    with lifecycle_lock(settings, key, f"offload {SET_ASIDE_OPTION}", repo=repo):
        record, state = _enabled(repo, key)  # again, under the locks
        assert state.enablement_id is not None
        already = repo.set_aside.seqs(key, state.enablement_id) & set(seqs)
        feed = _feed(source, record, state, repo)
        search = _unfit_changes(feed, key, seqs, already)
        changes, already = search.unfit, already - set(search.rows)
        installation, who, at = repo.installation_id, _who(), now()
        repo.set_aside.record(
            key,
            state.enablement_id,
            [
                SetAsideChange(
                    gl_seq=change.gl_seq,
                    op=change.op,
                    key=change.key,
                    row=search.rows[change.gl_seq],
                    column_name=change.column,
                    value_kind=change.value_kind,
                    installation_id=installation,
                    set_by=who,
                    set_at=at,
                )
                for change in changes
            ],
        )
        if changes:
            feed.set_aside(changes)
    log.info("set aside changes %s of %s", _listed(changes), key)
    result.changes = changes
    result.message = _message(key, changes, already)
    return result


def _feed_of(state: IncrementalState) -> str:
    return f"{feed_of(state).waits_in}"


def _listed(changes: Sequence[UnfitChange]) -> str:
    return ", ".join(str(change.gl_seq) for change in changes) or "none"


def _message(key: str, changes: Sequence[UnfitChange], already: set[int]) -> str:
    if not changes:
        listed = ", ".join(map(str, sorted(already)))
        return f"nothing to do: gl_seq {listed} of {key} is already set aside"
    unfollowed = [change for change in changes if change.later_seq is None]
    after = (
        "; the lake keeps the previous state of "
        + ", ".join(
            "(" + ", ".join(f"{k}={v}" for k, v in change.key.items()) + ")"
            for change in unfollowed
        )
        + " until the row changes in the source again (update it to a value the lake can take)"
        if unfollowed
        else "; a later change of each key ships with the next extraction"
    )
    return (
        f"set aside {len(changes)} change(s) of {key} (gl_seq {_listed(changes)}): recorded in "
        f"the repository, where display_incremental_status lists them{after}"
    )
