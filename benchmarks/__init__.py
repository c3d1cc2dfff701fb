"""Benchmarks for sensec and sensevm against CPython and the reference interpreter."""
