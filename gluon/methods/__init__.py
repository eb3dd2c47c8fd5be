"""Extraction methods, one module each, found by name (``get_method``).

Adding a method:
1. a module ``gluon/methods/<name>.py`` holding one ``ExtractionMethod`` subclass
   ``<Name>Method`` that declares the spec's facts as class attributes: ``name``
   (the ``--incremental-extraction-method`` value), ``summary`` (a few words
   for ``offload --help``), ``is_basic``, ``captured_dml``, ``offload_use_cases``,
   ``view_kind``, ``source_objects``, ``dialects``, ``change_reader``,
   ``verifies_unique_key``, ``when_to_use``;
   override ``validate`` only when some source tables must be refused;
2. import the module below, so that importing ``gluon.methods`` registers it;
3. a new ``SourceObject`` kind needs its facts beside it in ``gluon/methods/base.py``
   (``CREATION_ORDER``, ``OBJECT_TYPES``, and ``UNMARKED_KINDS``/``SNAPSHOT_KINDS`` where
   they apply) and ``create_<kind>``/``drop_<kind>`` templates under
   ``templates/<dialect>/``; a new ``ChangeReader`` needs a feed in ``gluon/extract/feeds/``
   registered in ``FEEDS``: what differs between readers (what enabling checks, what a
   disable would lose, how status counts the backlog, whether merge mode IMMEDIATE can
   merge its batches) is a class attribute or a hook of the ``ChangeFeed`` protocol
   (``gluon/extract/feeds/base.py``), so no caller changes;
4. its row in the expected table of ``tests/unit/test_methods.py``. The capture
   tests (``tests/integration/test_capture_*.py``) loop over
   ``registered_methods()`` and cover it without changes.

A package outside gluon adds a method without editing gluon: an entry point in the group
``gluon.methods`` (``METHODS_ENTRY_POINTS``; name: the method's name, value:
``package.module:ClassName``), loaded by ``registered_methods`` and ``get_method``; it may
use only the change readers and capture object kinds gluon has.

No module outside ``gluon/methods/``, ``gluon/extract/feeds/`` and ``gluon/source/`` names a method,
a feed, a dialect class or a dialect (``tests/unit/test_plugin_boundary.py``).
"""

from __future__ import annotations

from gluon.methods import (
    changelog,
    changelog_insert,
    ora_rowscn,
    pg_logical,
    updatable,
    updatable_changelog,
    updatable_insert,
)
from gluon.methods.base import ExtractionMethod, get_method, method_choices, registered_methods

__all__ = [
    "ExtractionMethod",
    "changelog",
    "changelog_insert",
    "get_method",
    "method_choices",
    "ora_rowscn",
    "pg_logical",
    "registered_methods",
    "updatable",
    "updatable_changelog",
    "updatable_insert",
]
