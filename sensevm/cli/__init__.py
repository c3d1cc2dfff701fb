"""sensevm.cli: the commands, the top layer (it may import every layer and the compiler).

The ``sensevm`` launcher and its fast path, the click commands, running a file, the REPL, the
inspect console, the test runner, highlighting.

The top layer: it may import every layer below and the compiler (to run ``.sns`` files)."""
