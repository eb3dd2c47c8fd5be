"""gluon benchmarks: ``python -m bench.run --scale {tiny,small,full}`` (see bench/README.md)."""
