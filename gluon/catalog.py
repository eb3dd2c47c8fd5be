"""Registers every offloaded table's lake objects in a Spark session, from the repository."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from gluon.config import Settings
from gluon.lake.session import LakeSession, open_session
from gluon.offload import OFFLOADED, register_user_view
from gluon.repo import Repository


def register_all(session: LakeSession, repo: Repository) -> list[str]:
    """Create every user view (and what it reads) in ``session``; return the view names."""
    views = []
    for record in repo.list_tables():
        if record.status == OFFLOADED:
            register_user_view(session, record)
            views.append(record.user_view)
    return views


@contextmanager
def lake_session(settings: Settings) -> Iterator[LakeSession]:
    """A lake session with every gluon view registered (the Python API for querying)."""
    repo = Repository(settings.repo_url)
    with open_session(settings) as session:
        register_all(session, repo)
        yield session
