"""``python -m sensevm``: the same entry as the console script (see sensevm.cli.launch)."""
from sensevm.cli.launch import entry

entry()
