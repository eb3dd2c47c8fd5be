"""A TRUNCATE captured the way the shared contract records one, before any capture does.

The contract: a changelog row with ``gl_op`` 'T', a ``gl_seq`` drawn like any other, every
table column NULL. Until the source-side capture (a PostgreSQL statement trigger) is there,
tests make one in a single transaction: empty the table (its row triggers record a delete
per row), take those deletes out of the changelog and record one 'T' in their place.
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.config import load_settings
from gluon.methods.base import SourceObject
from gluon.repo import Repository
from support.incremental import Source
from support.workload import Workload


def _object(source: Source, kind: SourceObject) -> str | None:
    state = Repository(load_settings().repo_url).incremental.get_state(source.table.upper())
    assert state is not None, "incremental update is not enabled"
    found = [o for o in state.source_objects if o.kind == kind.value]
    return f'"{found[0].schema}"."{found[0].name}"' if found else None


def truncate_through_changelog(source: Source, workload: Workload) -> None:
    """Empty ``workload``'s table in the source, captured as one 'T' change."""
    log = _object(source, SourceObject.CHANGELOG_TABLE)
    assert log is not None, "the method keeps no changelog"
    sequence = _object(source, SourceObject.CHANGELOG_SEQUENCE)
    with source.engine.begin() as db:
        before = db.execute(sa.text(f"SELECT COALESCE(MAX(gl_seq), 0) FROM {log}")).scalar_one()
        db.execute(sa.text(f"DELETE FROM {workload.table}"))
        db.execute(sa.text(f"DELETE FROM {log} WHERE gl_seq > :before"), {"before": before})
        if sequence is None:  # SQLite: AUTOINCREMENT draws it
            db.execute(sa.text(f"INSERT INTO {log} (gl_op, gl_origin) VALUES ('T', 'T')"))
        else:
            db.execute(
                sa.text(
                    f"INSERT INTO {log} (gl_seq, gl_op, gl_origin) "
                    f"VALUES (nextval('{sequence}'), 'T', 'T')"
                )
            )
    workload.expected.clear()
