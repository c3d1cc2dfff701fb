"""``python -m sensevm``."""
from .cli import entry

entry()
