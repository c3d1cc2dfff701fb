"""Container shapes (provenance.SHAPES): what an Array's length and each element's place depend
on, kept beside the Array. The breakpoints a shape keeps are checked against a model that keeps
one dependence per element (as the taint oracle does), over random joins and pushes; the table
is checked to stay near the number of Arrays alive."""

from __future__ import annotations

import gc

from hypothesis import given, settings, strategies as st

from sensevm.guard import provenance as P

A, B = P.only(P.untrusted("a")), P.only(P.untrusted("b"))


class Model:
    """An Array as the oracle sees it: per element, the origins its place counted from the
    start and from the end depends on; and its length's origins."""

    def __init__(self, n, length=P.EMPTY):
        self.start = [P.EMPTY] * n
        self.end = [P.EMPTY] * n
        self.length = length

    def joined(self, other):
        out = Model(0, P.union(self.length, other.length))
        out.start = self.start + [P.union(s, self.length) for s in other.start]
        out.end = [P.union(e, other.length) for e in self.end] + other.end
        return out

    def pushed(self):
        self.start.append(self.length)
        self.end.append(P.EMPTY)


def made(n, length):
    items = list(range(n))
    P.add_length(items, length)
    return items


OPS = st.lists(st.tuples(st.sampled_from(["join_after", "join_before", "push"]),
                         st.integers(0, 3), st.sampled_from([P.EMPTY, A, B])),
               min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 3), first=st.sampled_from([P.EMPTY, A, B]), ops=OPS)
def test_breakpoints_give_each_element_the_dependence_of_its_place(n, first, ops):
    items, model = made(n, first), Model(n, first)
    for op, m, length in ops:
        if op == "push":
            items.append(len(items))
            P.pushed(items)
            model.pushed()
            continue
        other, other_model = made(m, length), Model(m, length)
        if op == "join_after":
            items, model = P.joined_shape(items + other, items, other), model.joined(other_model)
        else:
            items, model = (P.joined_shape(other + items, other, items),
                            other_model.joined(model))
    assert P.length_origins(items) == model.length
    for i in range(len(items)):
        assert P.position_origins(items, i) == model.start[i], ("start", i)
        assert P.position_origins(items, i - len(items)) == model.end[i], ("end", i)


def test_the_table_keeps_only_arrays_alive_or_recent():
    """An Array labelled and dropped, twenty thousand times over, leaves at most the table's
    doubling bound behind: entries whose Array only the table holds are dropped."""
    gc.collect()
    kept = [made(1, A) for _ in range(10)]
    for _ in range(20_000):
        made(0, B)
    assert len(P.SHAPES) < 2 * max(1024, len(kept)) + 64
    assert all(P.length_origins(k) == A for k in kept)      # the live ones keep their shapes
