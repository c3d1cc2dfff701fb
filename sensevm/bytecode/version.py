"""What ``sensevm --version`` and ``sensec --version`` print: the tool's version, the language
version it implements, the .snb format it reads and writes, and the Python running it."""

from __future__ import annotations

# The language as the reference interpreter specifies it (the spec, LANGUAGE.md, is written
# against sense-lang 0.20.0); the extensions this implementation adds are in EXTENSIONS.md.
LANGUAGE_VERSION = "0.20.0"


def version_text(prog: str, version: str) -> str:
    import platform
    from sensevm.bytecode.opcodes import FORMAT_MAJOR, FORMAT_MINOR
    return (f"{prog} {version}\n"
            f"language: Sense {LANGUAGE_VERSION} (the reference interpreter sense-lang "
            f"{LANGUAGE_VERSION}'s, with this implementation's extensions)\n"
            f"bytecode: .snb format {FORMAT_MAJOR}.{FORMAT_MINOR} (reads {FORMAT_MAJOR}.0 to "
            f"{FORMAT_MAJOR}.{FORMAT_MINOR})\n"
            f"python: {platform.python_implementation()} {platform.python_version()}\n")
