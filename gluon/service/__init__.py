"""``gluon service``: extractions and compactions of many tables from one long-running
process, the alternative to one cron line per table and action.

``config`` reads the tables file, ``schedule`` decides what is due (pure functions of a
clock), ``runner`` runs it with bounded parallelism, ``metrics`` serves Prometheus
metrics, ``lag`` reads each table's lag from the status collection.
"""
