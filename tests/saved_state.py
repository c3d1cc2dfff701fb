"""Reading and re-signing saved agent states in tests: what an attacker who holds the host key
could write, so that the checks behind the MAC are tested too (sensevm/world/persist.py)."""

from __future__ import annotations

import json
import os


def read_state(directory, name: str) -> dict:
    """The state inside DIR/NAME.json (its MAC not checked)."""
    data = json.loads(open(os.path.join(directory, f"{name}.json"), "rb").read())
    return data["state"]


def write_state(directory, name: str, state: dict, *, sign: bool = True) -> None:
    """Write ``state`` as DIR/NAME.json, with a valid MAC when ``sign`` (the host key of
    $SENSE_KEY_FILE, over program.snb beside it), else with the MAC of the file it replaces."""
    from sensevm.guard.keys import derive
    from sensevm.world.persist import MAC_PURPOSE, _mac
    path = os.path.join(directory, f"{name}.json")
    body = json.dumps(state, ensure_ascii=False, sort_keys=True,
                      separators=(",", ":")).encode("utf-8")
    if sign:
        program = open(os.path.join(directory, "program.snb"), "rb").read()
        mac = _mac(derive(MAC_PURPOSE, outside=str(directory)), program, body)
    else:
        mac = json.loads(open(path, "rb").read())["mac"]
    with open(path, "wb") as fh:
        fh.write(b'{"mac":"' + mac.encode() + b'","state":' + body + b"}")
