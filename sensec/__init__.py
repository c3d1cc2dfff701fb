"""sensec: the Sense compiler, .sns source to verified .snb bytecode."""

__version__ = "0.1.0"
