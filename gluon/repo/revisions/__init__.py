"""The repository's Alembic script directory: ``env.py`` and the frozen revisions in
``versions/``, run by ``gluon.repo.migrations`` (no ``alembic.ini`` needed).

A revision spells out its tables' columns as they were when it shipped; it never imports
``gluon.repo.models``, so a repository created today and one upgraded from an old release end
with the same schema. Never edit a revision that has shipped: add one.
"""
