"""AST node classes: fields in order with defaults, keyword or positional construction,
equality and hashing by value, a readable repr, and no assignment after construction."""

from __future__ import annotations

import math

import pytest

from sensec import nodes as n
from sensevm.base.errors import Pos

P, Q = Pos(1, 1), Pos(2, 5)


def test_fields_in_declaration_order_with_defaults():
    assert n.Param._fields == ("pos", "name", "type")
    assert n.Param._child_fields == ("name", "type")
    assert n.Param(P, "x") == n.Param(pos=P, name="x", type=None)
    assert n.Param(P, "x", n.TypeRef(P, "Int")).type.text == "Int"


def test_wrong_arguments_are_type_errors():
    with pytest.raises(TypeError):
        n.Param(P)                              # 'name' missing
    with pytest.raises(TypeError):
        n.Param(P, "x", None, "extra")
    with pytest.raises(TypeError):
        n.Param(P, "x", colour="red")


def test_equality_and_hash_by_value_and_class():
    a, b = n.Name(P, "x"), n.Name(P, "x")
    assert a == b and hash(a) == hash(b) and a is not b
    assert a != n.Name(Q, "x") and a != n.Name(P, "y")
    assert n.IntLit(P, 1) != n.FloatLit(P, 1.0)         # another class is never equal
    assert len({a, b, n.Name(Q, "x")}) == 2
    nan = float("nan")
    same = n.FloatLit(P, nan)
    assert same == n.FloatLit(P, nan) and math.isnan(same.value)   # as dataclasses compare


def test_repr_names_every_field():
    assert repr(n.Name(P, "x")) == f"Name(pos={P!r}, name='x')"


def test_nodes_cannot_be_changed():
    node = n.Name(P, "x")
    with pytest.raises(AttributeError, match="cannot assign to field 'name'"):
        node.name = "y"
    with pytest.raises(AttributeError, match="cannot delete field 'name'"):
        del node.name
    with pytest.raises(AttributeError):
        node.colour = "red"
    assert not hasattr(node, "__dict__")                 # slotted
    assert node.name == "x"


def test_children_in_field_order_through_tuples():
    call = n.Call(P, n.Name(P, "f"), (n.IntLit(P, 1), n.IntLit(Q, 2)))
    assert call.children() == [n.Name(P, "f"), n.IntLit(P, 1), n.IntLit(Q, 2)]


def test_methods_and_properties_of_the_class_survive():
    t = n.TypeRef(P, "Array", (n.TypeRef(P, "Int"),))
    assert t.text == "Array<Int>"
