"""gluon: keep relational tables offloaded to a Delta Lake lakehouse up to date."""

__version__ = "0.1.0"
"""The release (the only place it is written: pyproject.toml reads it from here)."""
