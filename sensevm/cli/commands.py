"""The ``sensevm`` click commands (run, resume, recover, audit, test, memory-path, repl, inspect;
worker, submit, runs, answer, approve, settle, output on Temporal), entered through launch.py."""

from __future__ import annotations

import functools
import os
import sys

import click

from sensevm.base.errors import SenseError, SnbFormatError, VerifyError
from sensevm.cli import running
# Running a file is shared with the click-free fast path of `sensevm run FILE` (launch.py).
from sensevm.cli.running import open_audit, run_file, run_guarded


def _limit_value(ctx, param, value):
    if value is None:
        return None
    from sensevm.runtime.limits import parse
    try:
        return parse(param.name, value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def limit_options(command):
    """The resource-limit options (docs/limits.md); each also read from the environment."""
    from sensevm.runtime.limits import (DEFAULT_MAX_ARRAY, DEFAULT_MAX_DEPTH, DEFAULT_MAX_STRING,
                                        DEFAULT_MAX_WORKERS)
    helps = {
        "max_steps": ("N", "Stop the program after N steps (loop iterations and calls) "
                           "[SENSE_MAX_STEPS; default: no limit]."),
        "max_depth": ("N", "Allow at most N nested calls "
                           f"[SENSE_MAX_DEPTH; default: {DEFAULT_MAX_DEPTH:,}]."),
        "max_workers": ("N", "Allow at most N async tools and agents running at once "
                             f"[SENSE_MAX_WORKERS; default: {DEFAULT_MAX_WORKERS:,}]."),
        "max_string": ("N", "Allow Strings of at most N characters "
                            f"[SENSE_MAX_STRING; default: {DEFAULT_MAX_STRING:,}]."),
        "max_array": ("N", "Allow Arrays of at most N elements "
                           f"[SENSE_MAX_ARRAY; default: {DEFAULT_MAX_ARRAY:,}]."),
        "timeout": ("SECONDS", "Stop the program after SECONDS of wall-clock time "
                               "[SENSE_TIMEOUT; default: no limit]."),
    }
    from sensevm.runtime.limits import SPECS
    for name, option, _ in reversed(SPECS):
        metavar, text = helps[name]
        command = click.option(option, name, metavar=metavar, default=None,
                               callback=_limit_value, help=text)(command)
    return command


def _given(**limits) -> dict:
    return {name: value for name, value in limits.items() if value is not None}


def version_option(prog: str, version: str):
    """``--version``: the tool's, the language's, the .snb format's and Python's versions."""
    def show(ctx, param, value):
        if not value or ctx.resilient_parsing:
            return
        from sensevm.bytecode.version import version_text
        click.echo(version_text(prog, version), nl=False)
        ctx.exit()
    return click.option("--version", is_flag=True, expose_value=False, is_eager=True,
                        callback=show, help="Show the versions (this tool, the language, the "
                                            ".snb format, Python) and exit.")


# The variables the running commands read (grep os.environ in sensevm/ and sensec/).
RUN_ENVIRONMENT = """\b
Environment:
  SENSE_MAX_STEPS, SENSE_MAX_DEPTH, SENSE_MAX_WORKERS, SENSE_MAX_STRING,
  SENSE_MAX_ARRAY, SENSE_TIMEOUT    resource limits (the options win; docs/limits.md)
  SENSE_TIER            execution tier: 1, 2 or auto (as --tier)
  SENSE_MEMORY_DIR      where persistent memories without a path go (docs/memory.md)
  SENSE_KEY_FILE        the host key for audit MACs and saved agents (XDG_CONFIG_HOME)
  SENSE_HTTP_TIMEOUT, SENSE_HTTP_MAX_BYTES, SENSE_HTTP_MAX_REDIRECTS    std.net HTTP
  SENSE_SMTP_HOST, SENSE_SMTP_PORT, SENSE_SMTP_USER, SENSE_SMTP_PASSWORD_ENV,
  SENSE_SMTP_FROM, SENSE_SMTP_TIMEOUT    std.net mail
  SENSE_SHELL_TIMEOUT   std.net shell commands (seconds, default 60)
  OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL    models
  SENSE_DEBUG           show Python tracebacks of internal errors
  NO_COLOR              no colour in error messages"""

RUN_EPILOG = """\b
Examples:
  sensevm run hello.sns                 compile in memory and run
  sensec build app.sns && sensevm run app.snb
  sensevm run app.snb --max-steps 1e6 -- --user ana   (args for std.env)
  echo 'print(1 + 2)' | sensevm run -   read the program from stdin
  sensevm run app.snb --dry-run         skip action bodies

Relative files a program names (persistent memories, a scripted model's
script, the sessions' log) resolve against FILE's directory, not the
working directory.

""" + RUN_ENVIRONMENT

TEST_EPILOG = """\b
Examples:
  sensevm test tests/                   every test_*.sns and *_test.sns below
  sensevm test a_test.sns b_test.sns -k refund   only tests whose names contain "refund"
  sensevm test math_test.sns --timeout 5

""" + RUN_ENVIRONMENT


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@version_option("sensevm", __import__("sensevm").__version__)
def main():
    """Run Sense programs: .snb bytecode built by sensec, or .sns source compiled in memory.

    With no command in a terminal, starts the REPL (`sensevm repl`).
    """


class _RunCommand(click.Command):
    """``run FILE [OPTIONS] -- ARG...``: what follows the first ``--`` is the program's own
    arguments (std.env.args()), never options or FILE (launch.py's fast path splits the same)."""

    def parse_args(self, ctx, args):
        if "--" in args:
            cut = args.index("--")
            args, ctx.meta["sense.program_args"] = args[:cut], tuple(args[cut + 1:])
        return super().parse_args(ctx, args)

    def collect_usage_pieces(self, ctx):
        return super().collect_usage_pieces(ctx) + ["[-- ARG...]"]


@main.command(cls=_RunCommand, epilog=RUN_EPILOG)
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--dry-run", is_flag=True, help="Skip action bodies and rollbacks; print a summary.")
@click.option("--audit-log", "audit_log", type=click.Path(), default=None,
              help="Also append every audit record to this file as a hash-chained JSON line.")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="Save every paused agent here, to continue later with `sensevm resume`.")
@click.option("--approve", "approve", metavar="HASH", default=None,
              help="Approve a session left undecided if its manifest has exactly this hash.")
@click.option("--session-log", "session_log", type=click.Path(dir_okay=False), default=None,
              help="The sessions' write-ahead log (default: .sense/sessions.wal beside FILE).")
@click.option("--tier", type=click.Choice(["1", "2", "auto"]), default=None,
              help="Force an execution tier: 1 = interpreter only, 2 = compile every code "
                   "object it can, auto (default) = compile hot code. Same as SENSE_TIER.")
@click.option("--request", "request", metavar="TEXT", default=None,
              help="The user's request in their own words: evidence for the second look, and "
                   "what user_request() returns.")
@click.option("--second-look", "second_look", type=click.Choice(["on", "off"]), default="on",
              show_default=True,
              help="off: no provenance checks on outgoing actions (for comparison runs only; "
                   "recorded in the audit log).")
@click.option("--dry-run-allow", "dry_run_allow", multiple=True,
              type=click.Choice(["python.import", "mcp.connect"]),
              help="With --dry-run: still let the program import Python modules or start MCP "
                   "servers (host code, which a dry run does not run otherwise); repeatable.")
@click.option("--import-root", "import_root", type=click.Path(file_okay=False, exists=True),
              default=None, help="Let a .sns FILE import modules from anywhere under this "
                                 "directory (default: FILE's own directory).")
@limit_options
def run(file, dry_run, audit_log, state_dir, approve, session_log, tier, request, second_look,
        dry_run_allow, import_root, **limits):
    """Verify and run FILE (.snb, or .sns compiled in memory; - reads it from stdin).

    The arguments after `--` are the program's: std.env's args() returns them (as the user's
    words, origin user).

    A program that imports Python (`allow python.import`) or starts an MCP server (`allow
    mcp.connect`) is given the whole host through it: those capabilities are never granted by
    default, and a dry run refuses them unless --dry-run-allow names them (docs/interop.md).

    Exit status: 0 on success, 1 on an error, 2 on a usage error, 4 when a resource limit
    stopped the program (docs/limits.md).
    """
    if tier is not None:
        os.environ["SENSE_TIER"] = tier
    sys.exit(run_file(file, dry_run=dry_run, audit_log=audit_log, state_dir=state_dir,
                      approve=approve, session_log=session_log, request=request,
                      second_look=second_look == "on", limits=_given(**limits),
                      dry_run_allow=dry_run_allow, import_root=import_root,
                      program_args=click.get_current_context().meta.get("sense.program_args",
                                                                        ())))


@main.command()
@click.argument("wal", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the verdicts as JSON.")
def recover(wal, as_json):
    """Give every session in the write-ahead log WAL its verdict (safe to run again)."""
    import json
    from sensevm.guard.wal import WalError, recover as recover_log
    try:
        verdicts = recover_log(wal)
    except WalError as exc:
        click.echo(f"sensevm recover: {exc}", err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps([v.as_json() for v in verdicts], indent=2))
    else:
        for v in verdicts:
            click.echo(v.describe())
        if not verdicts:
            click.echo("no sessions in the log")
    sys.exit(0 if all(v.clean for v in verdicts) else 3)


def resume_agent(directory: str, name: str, answer: str, *, stdout=None, stderr=None,
                 audit_log: str | None = None) -> int:
    """Continue the agent saved in ``directory`` with ``answer``; return the exit status.

    The saved state is untrusted input (persist.py): it must pass its MAC, its binding to the
    program.snb beside it and every structural check before any of it runs."""
    import os
    from sensevm.world.persist import StateError, load_agent, read_saved
    from sensevm.runtime.vm import VM
    from sensevm.world import install
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    state_path = os.path.join(directory, f"{name}.json")
    try:
        verified, state = read_saved(directory, name)
    except FileNotFoundError as exc:
        stderr.write(f"sensevm: no saved agent '{name}' in {directory} ({exc.filename} is missing)\n")
        return 1
    except OSError as exc:
        stderr.write(f"sensevm: cannot read the saved agent '{name}' ({state_path}): "
                     f"{exc.strerror or exc}\n")
        return 1
    except (SnbFormatError, VerifyError) as exc:
        from sensevm.base.diagnostics import report_file_error
        report_file_error(f"{directory}/program.snb", exc, stderr)
        return 1
    except StateError as exc:
        stderr.write(f"sensevm: cannot resume agent '{name}': {exc}\n")
        return 1
    limits = running.run_limits(stderr)
    if limits is None:
        return 2
    audit = open_audit(audit_log, stderr)
    if audit is None:
        return 1
    sources = {s.path: s.text for s in verified.program.sources}
    install()
    vm = VM(verified, stdout=stdout, audit=audit, state_dir=directory, **limits)

    def body():
        vm.resume_saved(load_agent(vm, state, state_path), answer)
    try:
        status = run_guarded(body, audit, sources, stdout, stderr, error_path=state_path)
        running.paused_note(vm, stderr)
        return status
    except StateError as exc:       # nothing of the state has run
        stderr.write(f"sensevm: cannot resume agent '{name}': {exc}\n")
        return 1


@main.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.argument("agent")
@click.argument("answer")
@click.option("--audit-log", "audit_log", type=click.Path(), default=None,
              help="Append the audit records of this continuation to this log.")
def resume(directory, agent, answer, audit_log):
    """Continue AGENT, saved in DIRECTORY by `run --state-dir`, with ANSWER as pause()'s result."""
    sys.exit(resume_agent(directory, agent, answer, audit_log=audit_log))


def verify_audit_file(path: str, *, stdout=None, stderr=None,
                      checkpoint: str | None = None) -> int:
    """Check the audit log at ``path`` as ``sensevm audit verify`` does; return its status
    (audit.VERIFY_*: 0 sealed and intact, 1 damaged or forged, 2 torn, 3 a run cut short)."""
    from sensevm.guard.audit import VERIFY_DAMAGED, AuditLogError, verify_chain
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    try:
        result = verify_chain(path, checkpoint=checkpoint)
    except AuditLogError as exc:
        stderr.write(f"{exc}\n")
        return VERIFY_DAMAGED
    (stdout if result.sealed else stderr).write(result.message() + "\n")
    return result.status


def latest_checkpoint(path: str, *, stdout=None, stderr=None) -> int:
    """Print the last signed checkpoint of the audit log at ``path`` (``audit checkpoint``)."""
    import json
    from sensevm.guard.audit import AUDIT_SUBJECT, AuditLogError, verify_chain
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    try:
        result = verify_chain(path)
    except AuditLogError as exc:
        stderr.write(f"{exc}\n")
        return 1
    if not result.ok:
        stderr.write(result.message() + "\n")
        return result.status
    note = None
    with open(path, "rb") as fh:
        for raw in fh:
            if b'"kind":"audit"' in raw:
                entry = json.loads(raw)
                if entry["subject"] == AUDIT_SUBJECT and entry["event"] in ("checkpoint",
                                                                           "sealed"):
                    note = entry["detail"]
    if note is None:
        stderr.write(f"{path}: holds no checkpoint yet\n")
        return 1
    stdout.write(note)
    return 0


@main.group()
def audit():
    """Inspect durable audit logs written by `sensevm run --audit-log`."""


@audit.command("verify")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--checkpoint", "checkpoint", type=click.File("r", encoding="utf-8"),
              default=None, help="A checkpoint note kept outside the log (from `sensevm audit "
                                 "checkpoint`): the log must extend it.")
def audit_verify(file, checkpoint):
    """Check FILE: its hash chain, every line's MAC (the host key), every signed checkpoint,
    and that every run ended with its seal; name the first broken line.

    Exit status: 0 intact and sealed; 1 damaged, forged or not checkable; 2 the last line is
    torn (a crash in the middle of a write); 3 intact, but a run ended without its seal (the
    process died, or records were removed from the end)."""
    sys.exit(verify_audit_file(file, checkpoint=checkpoint.read() if checkpoint else None))


@audit.command("checkpoint")
@click.argument("file", type=click.Path(dir_okay=False))
def audit_checkpoint(file):
    """Print FILE's latest signed checkpoint (origin, size, Merkle root): keep it elsewhere,
    and `audit verify --checkpoint` will find any later cut or rewrite of what it covers."""
    sys.exit(latest_checkpoint(file))


@main.command("test", epilog=TEST_EPILOG)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("-k", "pattern", default=None, metavar="PATTERN",
              help="Run only the tests whose names contain PATTERN (ignoring case); the "
                   "others are skipped and counted as deselected.")
@limit_options
def test_command(paths, pattern, **limits):
    """Run the test blocks of PATHS (files, or test_*.sns / *_test.sns under directories).

    Each failure is also shown on stderr as FILE:LINE:COL: KIND: message. Exit status 1 if any
    test failed or any file errored. The limits apply to each file afresh; a file stopped by
    one is reported as an ERROR.
    """
    from sensevm.cli.testrunner import run_tests
    sys.exit(run_tests(list(paths), limits=_given(**limits), pattern=pattern))


@main.command("memory-path")
@click.argument("file", required=False)
def memory_path_command(file):
    """Show where FILE's 'persistent memory' declarations keep their SQLite files, without
    running it (without FILE: whether SENSE_MEMORY_DIR is set)."""
    from sensevm.cli.memorypath import memory_path
    sys.exit(memory_path(file))


@main.command()
@click.option("--dry-run", is_flag=True,
              help="Skip action bodies and rollbacks, as `run --dry-run` does.")
def repl(dry_run):
    """Start an interactive Sense session (or run piped input line by line).

    When stdin or stdout is not a terminal, reads the input to the end without prompts or
    colour, errors on stderr; exit status 1 if any input failed, else 0.
    """
    from sensevm.cli.repl import main as repl_main
    sys.exit(repl_main(dry_run=dry_run))


@main.command("inspect")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True,
              help="Run FILE and drive it as `run --dry-run` does: commits skip action bodies.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="The port to listen on; 0 picks a free one.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The interface to listen on. Anything but loopback lets other machines "
                   "reach the console (they still need the token).")
@click.option("--request", "request", metavar="TEXT", default=None,
              help="The user's request in their own words, as for `run --request`.")
def inspect_command(file, dry_run, port, host, request):
    """Run FILE like `run`, then serve a live console (tools, actions, agents, memories, the
    audit tree) on http://HOST:PORT/ until Ctrl-C; the URL, with its access token, is printed."""
    from sensevm.cli.console import inspect_file
    sys.exit(inspect_file(file, dry_run=dry_run, host=host, port=port, request=request))


# ----------------------------------------------------------------------------- on Temporal
# The optional [temporal] extra (docs/temporal.md): runs that outlive any one process, their
# segments run by workers. Everything is imported inside the commands.

TEMPORAL_EPILOG = """\b
Examples (docs/temporal.md):
  temporal server start-dev --headless     a dev server on 127.0.0.1:7233
  sensevm worker                           as many as you like, on any machine
  sensevm submit clerk.sns --id clerk-1    prints clerk-1
  sensevm runs                             clerk-1  waiting for an answer: agent ...
  sensevm answer clerk-1 clerk bob         accepted once; any worker goes on
  sensevm approve clerk-1 sha256:83c3...   the whole hash `sensevm runs` shows
  sensevm approve clerk-1 sha256:83c3... --decline    or decline it
  sensevm settle clerk-1 2 --happened      an action body in flight when its worker died
  sensevm output clerk-1 --audit           its audit log, one chain

\b
Environment:
  SENSE_TEMPORAL, SENSE_TEMPORAL_NAMESPACE, SENSE_TEMPORAL_QUEUE    as the options
  SENSE_KEY_FILE        the host key: every worker of a run must share it"""


def temporal_options(command, *, queue: bool = True):
    command = click.option("--namespace", default=None,
                           help="The Temporal namespace [SENSE_TEMPORAL_NAMESPACE; "
                                "default: default].")(command)
    if queue:
        command = click.option("--task-queue", "task_queue", default=None,
                               help="The task queue of the workers [SENSE_TEMPORAL_QUEUE; "
                                    "default: sense].")(command)
    return click.option("--temporal", "address", metavar="HOST:PORT", default=None,
                        help="The Temporal server's address [SENSE_TEMPORAL; default: "
                             "127.0.0.1:7233].")(command)


@main.command(epilog=TEMPORAL_EPILOG)
@click.option("--concurrency", type=click.IntRange(1, 64), default=None, metavar="N",
              help="Segments run at once, each on a thread of its own [default: 4].")
@temporal_options
def worker(concurrency, address, namespace, task_queue):
    """Run Sense runs' segments for a Temporal server, until Ctrl-C (docs/temporal.md)."""
    from sensevm.cli.temporal import cli
    sys.exit(cli.worker(*cli.settings(address, namespace, task_queue),
                        concurrency=concurrency))


@main.command(cls=_RunCommand, epilog=TEMPORAL_EPILOG)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--id", "run_id", default=None, help="The run's id (default: sense-RANDOM).")
@click.option("--heartbeat-timeout", "heartbeat", type=click.FloatRange(2, 3600),
              default=10, show_default=True, metavar="SECONDS",
              help="How long a segment's worker may be silent before the segment is given to "
                   "another worker.")
@click.option("--history-events", "history_events", type=click.IntRange(1), default=None,
              metavar="N", help="Continue the run as new (the same run id, a fresh history) "
                                "between segments once its history has N events "
                                "[default: 4000, or 4 MB of history].")
@click.option("--request", "request", metavar="TEXT", default=None,
              help="The user's request in their own words, as for `run --request`.")
@click.option("--import-root", "import_root", type=click.Path(file_okay=False, exists=True),
              default=None, help="As for `run`.")
@temporal_options
def submit(file, run_id, heartbeat, history_events, request, import_root, address, namespace,
           task_queue):
    """Verify FILE (a .sns compiled first) and start its run on Temporal; print the run's id.

    Any worker continues it; `sensevm runs` shows it, `sensevm answer` answers its agents,
    `sensevm output` prints what it printed."""
    from sensevm.cli.temporal import cli
    address, namespace, task_queue = cli.settings(address, namespace, task_queue)
    args = click.get_current_context().meta.get("sense.program_args", ())
    sys.exit(cli.submit(file, run_id, address, namespace, task_queue, args=args,
                        request=request, import_root=import_root, heartbeat=heartbeat,
                        history_events=history_events))


@main.command("runs", epilog=TEMPORAL_EPILOG)
@click.option("--json", "as_json", is_flag=True, help="Print the runs as JSON.")
@functools.partial(temporal_options, queue=False)
def runs_command(as_json, address, namespace):
    """List the runs on Temporal, each with its state: running, waiting for an answer (the
    agent and its question), waiting for a session approval (the manifest and its hash),
    completed, failed (and why, when the run knows)."""
    from sensevm.cli.temporal import cli
    address, namespace, _ = cli.settings(address, namespace, None)
    sys.exit(cli.runs(address, namespace, as_json=as_json))


@main.command("answer", epilog=TEMPORAL_EPILOG)
@click.argument("run_id")
@click.argument("agent")
@click.argument("text")
@functools.partial(temporal_options, queue=False)
def answer_command(run_id, agent, text, address, namespace):
    """Answer AGENT of run RUN_ID, waiting on ask_human or pause(), with TEXT (accepted once)."""
    from sensevm.cli.temporal import cli
    address, namespace, _ = cli.settings(address, namespace, None)
    sys.exit(cli.answer(run_id, agent, text, address, namespace))


@main.command("approve", epilog=TEMPORAL_EPILOG)
@click.argument("run_id")
@click.argument("hash_", metavar="HASH")
@click.option("--decline", is_flag=True,
              help="Decline it instead: the session aborts (its rollbacks run), nothing "
                   "irreversible runs, as when a person at the terminal says no.")
@functools.partial(temporal_options, queue=False)
def approve_command(run_id, hash_, decline, address, namespace):
    """Approve the session run RUN_ID waits on: HASH is its manifest's whole hash
    (sha256:..., as `sensevm runs` shows it), which binds exactly as `run --approve` does;
    a short or another manifest's hash is refused. Any worker then goes on with the run."""
    from sensevm.cli.temporal import cli
    address, namespace, _ = cli.settings(address, namespace, None)
    sys.exit(cli.approve(run_id, hash_, address, namespace, decline=decline))


@main.command("settle", epilog=TEMPORAL_EPILOG)
@click.argument("run_id")
@click.argument("effect", type=click.IntRange(0))
@click.option("--happened", "outcome", flag_value="happened", default=None,
              help="It happened: the commit (or rollback) succeeds, its value nil, its body "
                   "not run again.")
@click.option("--not-happened", "outcome", flag_value="not-happened",
              help="It did not: the commit (or rollback) fails with a SenseRuntimeError the "
                   "program can catch, its body not run.")
@functools.partial(temporal_options, queue=False)
def settle_command(run_id, effect, outcome, address, namespace):
    """Settle the action body run RUN_ID waits on (a commit or a rollback): its worker died
    while it was in flight, so whether its effect happened is unknown and it is never run
    again. EFFECT is its number, as `sensevm runs` shows it; say what you found out, outside
    the run. Any worker then goes on with the run, the body not run either way."""
    if outcome is None:
        raise click.UsageError("say what happened: --happened or --not-happened")
    from sensevm.cli.temporal import cli
    address, namespace, _ = cli.settings(address, namespace, None)
    sys.exit(cli.settle(run_id, effect, outcome, address, namespace))


@main.command("output", epilog=TEMPORAL_EPILOG)
@click.argument("run_id")
@click.option("--audit", is_flag=True, help="Print the run's audit log (JSON lines) instead.")
@functools.partial(temporal_options, queue=False)
def output_command(run_id, audit, address, namespace):
    """Print what run RUN_ID has printed so far (all of it once it has ended)."""
    from sensevm.cli.temporal import cli
    address, namespace, _ = cli.settings(address, namespace, None)
    sys.exit(cli.output(run_id, address, namespace, audit=audit))
