"""``gluon verify``: compare an offloaded table in the lake with its source, key by key.

``canonical`` turns a row into values that compare equal across engines, ``checksums``
computes per bucket of the key's hash a count and checksum inside each engine, ``bisect``
narrows the differing buckets down to a few rows, ``look`` reads those rows from both
sides (``sides``: the column shape and grouping by key), ``compare`` diffs them by key,
``run`` orchestrates one table at a consistent point (extraction first, differing keys
re-checked after another one) and ``render`` prints the verdict.
"""
