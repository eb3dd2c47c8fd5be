"""Status of offloaded tables: ``display_incremental_status`` and ``offload_status_report``.

Services only read (the repository, Delta logs through deltalake, and the
source's changelog counts) and never start a Spark engine or print.
"""
