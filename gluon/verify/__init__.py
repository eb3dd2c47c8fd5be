"""``gluon verify``: compare an offloaded table in the lake with its source, key by key.

``canonical`` turns a row into values that compare equal across engines, ``sides`` reads
the rows each side holds, ``compare`` diffs them by key, ``run`` orchestrates one table at a
consistent point (extraction first, differing keys re-checked after another one) and
``render`` prints the verdict.
"""
