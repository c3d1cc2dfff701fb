"""Runs on a Temporal cluster (docs/temporal.md): the optional ``[temporal]`` extra.

Nothing here is imported by ``sensevm run``: the commands ``worker``, ``submit``, ``runs``,
``answer``, ``approve`` and ``output`` import these modules (and temporalio) when they are called.
``segment`` runs the VM from one saved state to the next pause and needs no temporalio;
``workflow`` is the workflow (deterministic, temporalio and the standard library only);
``worker`` is the activity and the worker loop; ``client`` is the commands' side.
"""
