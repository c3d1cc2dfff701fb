"""The ``sensec`` command: build, disassemble and check Sense programs (entered through sensec.launch)."""

from __future__ import annotations

import sys

import click

from sensevm.base.diagnostics import report, report_file_error
from sensevm.base.errors import SenseError, SnbFormatError, VerifyError


def _report_and_exit(err: SenseError) -> None:
    report(err, {})          # report() reads each error's source file for the caret
    sys.exit(1)


def _show_version(ctx, param, value):
    if not value or ctx.resilient_parsing:
        return
    from sensevm.bytecode.version import version_text
    from . import __version__
    click.echo(version_text("sensec", __version__), nl=False)
    ctx.exit()


BUILD_EPILOG = """\b
Examples:
  sensec build app.sns                  writes app.snb beside it
  sensec build app.sns -o dist/app.snb
  sensec build src/main.sns --import-root .

\b
Environment:
  SENSE_DEBUG           show Python tracebacks of internal errors
  NO_COLOR              no colour in error messages"""


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_show_version, help="Show the versions (this tool, the language, the "
                                           ".snb format, Python) and exit.")
def main():
    """Compile Sense source (.sns) to verified bytecode (.snb)."""


@main.command(epilog=BUILD_EPILOG)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Where to write the bytecode (default: FILE with .snb).")
@click.option("--import-root", "import_root", type=click.Path(file_okay=False, exists=True),
              default=None, help="Let FILE import modules from anywhere under this directory "
                                 "(default: FILE's own directory; symlinks are resolved first).")
def build(file, output, import_root):
    """Compile FILE.sns (and the modules it imports) to one .snb file.

    Imports are read only from under FILE's own directory unless --import-root widens it."""
    from .build import build_file
    status = build_file(file, output, import_root)
    if status:
        sys.exit(status)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--no-verify", is_flag=True, help="List a .snb file even if the verifier rejects it.")
def dis(file, no_verify):
    """Disassemble FILE (.sns source or .snb bytecode)."""
    from sensevm.bytecode.disasm import disassemble
    from sensevm.bytecode.snb import is_snb
    from sensevm.bytecode.snb import load
    from sensevm.bytecode.verify import verify
    try:
        with open(file, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        click.echo(f"sensec: cannot read {file}: {exc.strerror}", err=True)
        sys.exit(1)
    try:
        if is_snb(data) or file.endswith(".snb"):     # a damaged magic is no source file
            program = load(data)
        else:
            from .driver import compile_file
            program = compile_file(file)
    except SenseError as err:
        _report_and_exit(err)
    except SnbFormatError as exc:
        report_file_error(file, exc, sys.stderr)
        sys.exit(1)
    failed = None
    if not no_verify:
        try:
            verify(program)
        except VerifyError as exc:
            failed = exc
    # Listed as verified only when it was: --no-verify lists what the verifier would refuse.
    click.echo(disassemble(program, verified=not no_verify and failed is None), nl=False)
    if failed is not None:
        report_file_error(file, failed, sys.stderr)
        sys.exit(1)


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--import-root", "import_root", type=click.Path(file_okay=False, exists=True),
              default=None, help="Let each file import modules from anywhere under this "
                                 "directory (default: the file's own directory).")
def check(files, import_root):
    """Compile FILES (a directory: every .sns file under it) without writing anything; report
    every error of every file, and exit 1 if any file has one."""
    from .driver import check_file, check_warnings, sense_files
    failed = False
    for file in sense_files(files):
        errors = check_file(file, import_root)
        if errors:
            failed = True
            from sensevm.base.errors import CompileErrors
            _report(CompileErrors(errors))
        else:
            for pos, text in check_warnings(file):
                click.echo(f"{file}:{pos.line}:{pos.col}: warning: {text}", err=True)
    sys.exit(1 if failed else 0)


def _report(err):
    try:
        _report_and_exit(err)
    except SystemExit:
        pass


@main.command()
@click.argument("path", type=click.Path())
@click.option("-w", "--write", is_flag=True, help="Rewrite the files that are not formatted.")
@click.option("--check", is_flag=True,
              help="List the files that are not formatted and exit 1 if any; writes nothing.")
def fmt(path, write, check):
    """Print PATH (a .sns file, or every .sns file under a directory) in canonical form."""
    from .fmt import run
    sys.exit(run(path, write=write, check=check))


@main.command()
@click.option("--stdio", is_flag=True, help="Talk over stdin and stdout (the default and only "
                                            "transport; editors often pass it).")
def lsp(stdio):
    """Run the language server for editors, over stdio (needs pygls: pip install
    'sense-compiled[lsp]'). See docs/editors.md."""
    from .lsp import main as serve
    sys.exit(serve())
