"""``python -m benchmarks``: run the benchmark harness."""
from benchmarks.harness import main

main(prog_name="python -m benchmarks")
