"""The lake: Spark sessions (Sail, Spark Connect, classic), Delta tables, views.

``pyspark``, ``pysail`` and ``deltalake`` are imported only inside this
package, and lazily, so validation errors and no-op runs never start an engine.
"""
