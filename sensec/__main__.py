"""``python -m sensec``."""
from .launch import entry

entry()
