"""A table's incremental-update lifecycle: enabling, disabling, repairing and patching."""
