"""``python -m sensevm``: the same entry as the console script (see sensevm.launch)."""
from .launch import entry

entry()
