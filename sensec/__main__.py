"""``python -m sensec``."""
from .cli import entry

entry()
