"""sensevm.base: what every layer and the compiler share (errors, their rendering, files).

Errors with positions and their rendering, file access, digests, light records, the
reserved words.

Imports nothing else of sensevm (the layer contract in pyproject.toml says so and
``make test`` checks it)."""
