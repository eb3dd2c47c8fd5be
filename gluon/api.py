"""gluon's Python entry points: what code outside gluon may import.

The commands (``offload``, ``gluon``) are gluon's interface. Code that drives gluon from
Python instead (the benchmarks in ``bench/``, a notebook, a scheduler's own Python) imports
these names from here: they stay when modules move (``docs/layout-moves.md`` lists the
moves of the layout change). Every other module is internal.
``tests/unit/test_public_entry_points.py`` keeps ``bench/`` to this module.
"""

from gluon.capture.changelog import delete_changes
from gluon.capture.objects import create_source_objects, plan_source_objects
from gluon.config import Settings, load_settings
from gluon.lake.storage import read_delta
from gluon.methods import registered_methods
from gluon.naming import TableRef
from gluon.read.catalog import lake_session
from gluon.repo import Repository
from gluon.source import connect

__all__ = [
    "Repository",
    "Settings",
    "TableRef",
    "connect",
    "create_source_objects",
    "delete_changes",
    "lake_session",
    "load_settings",
    "plan_source_objects",
    "read_delta",
    "registered_methods",
]
