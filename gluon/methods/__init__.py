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
3. a new ``SourceObject`` kind needs ``create_<kind>``/``drop_<kind>`` templates
   under ``templates/<dialect>/`` (and an entry in ``gluon.capture``'s tables);
   a new ``ChangeReader`` needs a feed in ``gluon.extract``;
4. its row in the expected table of ``tests/unit/test_methods.py``. The capture
   tests (``tests/integration/test_capture_*.py``) loop over
   ``registered_methods()`` and cover it without changes.
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
