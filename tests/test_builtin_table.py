"""The declarative builtin table (sensevm/base/builtins.py) names exactly the builtins the runtime and the world define."""

from __future__ import annotations

from sensevm.base import builtins as table
from sensevm.runtime.builtins import CORE, SESSIONS
from sensevm.runtime.values import LIFECYCLE_METHODS
from sensevm.world import BUILTINS as WORLD


def _spellable(entries):
    # '@' names are what the compiler emits for a declaration; no program can spell them.
    return {b.name for b in entries if not b.name.startswith("@")}


def test_table_names_exactly_the_runtime_and_world_builtins():
    implemented = _spellable(CORE + SESSIONS + WORLD)
    described = {b.name for b in table.BUILTINS}
    assert described - implemented == set(), "described but not implemented"
    assert implemented - described == set(), "implemented but not described"
    assert len(table.BY_NAME) == len(table.BUILTINS), "a builtin is described twice"


def test_fixed_arities_agree_with_the_runtime():
    runtime = {b.name: b.arity for b in CORE + WORLD}
    for doc in table.BUILTINS:
        if runtime[doc.name] is not None:
            assert doc.arity == runtime[doc.name], doc.name


def test_labelled_arguments_only_where_the_runtime_takes_them():
    labels = {b.name for b in CORE + WORLD if b.labels}
    for doc in table.BUILTINS:
        if doc.labels:
            assert doc.name in labels, doc.name


def test_action_methods_are_described():
    described = {m.name for m in table.MEMBERS["Action"] if m.is_method}
    assert described == set(LIFECYCLE_METHODS)


def test_string_array_and_map_methods_are_described():
    from sensevm.runtime.methods import TABLES
    for kind, methods in TABLES.items():
        described = {m.name for m in table.MEMBERS[kind] if m.is_method}
        assert described == set(methods), kind


def test_every_row_has_a_one_line_doc():
    for doc in table.BUILTINS:
        assert doc.doc and "\n" not in doc.doc, doc.name
    for members in table.MEMBERS.values():
        for m in members:
            assert m.doc and "\n" not in m.doc, m.name
