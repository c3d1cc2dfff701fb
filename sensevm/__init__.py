"""sensevm: the Sense bytecode format, verifier and virtual machine (imports no compiler)."""

__version__ = "0.1.0"
