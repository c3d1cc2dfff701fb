"""How deeply a program may nest (docs/limits.md), and the deep stack the compiler's recursive passes run on.

The resolver, code generator and formatter recurse once per level of the tree, a few Python
frames each. Python's default limit (1,000 frames) let a 500-term sum or a few hundred nested
``if`` fail as an internal error. So a pass runs on a thread of its own whose stack and
recursion limit hold ``MAX_NESTING`` levels of its deepest shape, and each pass refuses a node
nested deeper than that with a positioned SenseSyntaxError (nothing deeper is ever entered).

Levels: the module is level 0, a top-level statement level 1, and every statement,
expression or call label one more than the one it is part of (a statement of a block, a
condition, an operand, an argument, an element). ``1 + 1 + 1`` nests: ``(1 + 1) + 1``. Type
annotations have a bound of their own (MAX_ANNOTATION_NESTING); parameters, import names and
policy rules are not levels.
"""

from __future__ import annotations

import sys
import threading

from sensevm.base.errors import SenseSyntaxError
from sensevm.bytecode.program import MAX_ANNOTATION_NESTING

from . import nodes as n

MAX_NESTING = 5000

# Python frames per level of the deepest pass (a statement of a block: visit, the statement's
# visitor, the block's loop and the visit of its statement), and what the pass's caller and
# the pass itself use besides.
_FRAMES_PER_LEVEL = 4
_FRAMES_BESIDES = 1000
RECURSION_LIMIT = _FRAMES_PER_LEVEL * MAX_NESTING + _FRAMES_BESIDES
# Generous: a level's C frames (where a pass goes through a builtin, as the formatter's tuple()
# of a generator does) take far less; the pages are only mapped when used.
STACK_BYTES = 256 * 1024 * 1024

_pass_thread = threading.local()   # .active on a pass's own thread
_raised = 0                     # passes running with the limit raised
_saved_limit = 0
_limit_lock = threading.Lock()


LEVELS = (n.Stmt, n.Expr, n.Label)      # the nodes that are levels


def too_deep(pos, path) -> SenseSyntaxError:
    return SenseSyntaxError(f"too deeply nested (more than {MAX_NESTING} levels of blocks and "
                            f"expressions)", pos, path=path)


def annotation_error(t: n.TypeRef, path):
    """The error of an annotation whose type arguments nest more than MAX_ANNOTATION_NESTING
    deep (``Int`` is 0, ``Array<Int>`` 1), at its start; else None. Without recursing."""
    level, todo = 0, [t]
    while todo:
        todo = [arg for ref in todo for arg in ref.args]
        if todo:
            level += 1
            if level > MAX_ANNOTATION_NESTING:
                return SenseSyntaxError(f"type annotation nested too deeply (more than "
                                        f"{MAX_ANNOTATION_NESTING} levels of type arguments)",
                                        t.pos, path=path)
    return None


def nesting_error(tree: n.Node, path):
    """The first problem (in source order) the compiler finds with how ``tree`` nests, as the
    error it gives, or None; without recursing. For a pass that runs without the resolver,
    which finds the same ones."""
    stack = [(tree, 0)]
    while stack:
        node, level = stack.pop()
        if type(node) is n.TypeRef:
            err = annotation_error(node, path)
            if err is not None:
                return err
            continue
        if level > MAX_NESTING:
            return too_deep(node.pos, path)
        kids = node.children()
        kids.reverse()
        stack.extend((kid, level + 1 if isinstance(kid, LEVELS) else level) for kid in kids)
    return None


def on_deep_stack(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on a thread whose stack and recursion limit hold MAX_NESTING
    levels of any pass; its result, or its exception re-raised here."""
    if getattr(_pass_thread, "active", False):
        return fn(*args, **kwargs)          # already here (a pass that starts another)
    outcome = []

    def run():
        _pass_thread.active = True
        try:
            outcome.append((True, fn(*args, **kwargs)))
        except BaseException as exc:        # handed to the caller's thread, which raises it
            outcome.append((False, exc))

    # A daemon: Ctrl-C interrupts the caller's join, and the exit does not wait for it.
    worker = threading.Thread(target=run, name="sensec-pass", daemon=True)
    _raise_limit()
    try:
        try:
            previous = threading.stack_size(STACK_BYTES)
            try:
                worker.start()
            finally:
                threading.stack_size(previous)
        except (ValueError, RuntimeError):  # a host with no such thread to give
            started = False
        else:
            started = True
            worker.join()
    finally:
        _restore_limit()
    if not started:
        return fn(*args, **kwargs)          # as before: Python's own limit, this stack
    ok, value = outcome[0]
    if ok:
        return value
    raise value


def _raise_limit() -> None:
    # The limit is the process's, shared by every thread: raised while any pass runs, put back
    # when the last one ends.
    global _raised, _saved_limit
    with _limit_lock:
        if _raised == 0:
            _saved_limit = sys.getrecursionlimit()
            if _saved_limit < RECURSION_LIMIT:
                sys.setrecursionlimit(RECURSION_LIMIT)
        _raised += 1


def _restore_limit() -> None:
    global _raised
    with _limit_lock:
        _raised -= 1
        if _raised == 0 and sys.getrecursionlimit() == max(_saved_limit, RECURSION_LIMIT):
            sys.setrecursionlimit(_saved_limit)
