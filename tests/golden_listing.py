"""Golden disassembly listings: tests/golden/NAME.sns compiles to exactly tests/golden/NAME.dis.

Run as a script (``make golden``) to regenerate the listings after a deliberate codegen change;
review the diff before committing it.
"""

from __future__ import annotations

import glob
import os
import sys

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")


def listing(path: str) -> str:
    from sensec.driver import compile_source
    from sensevm.bytecode.disasm import disassemble
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    # Compiled under its bare name so that listings do not depend on where the checkout is.
    return disassemble(compile_source(source, os.path.basename(path)))


def sources() -> list[str]:
    return sorted(glob.glob(os.path.join(GOLDEN, "*.sns")))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(GOLDEN)))
    for src in sources():
        with open(src[:-4] + ".dis", "w", encoding="utf-8") as fh:
            fh.write(listing(src))
        print("wrote", os.path.relpath(src[:-4] + ".dis"))
