"""The second look's verdict cache (secondlook.SecondLook._cached): a verdict is reused only for
the same action, the same arguments with the same origins and the same evidence and code.
These attack it: an argument changed between verify and commit through a shared Array or Map,
origins changed under the same text, evidence added in between, an approval for one prepared
action reused by another. Each runs on both VM tiers (the ``go`` fixture)."""

from __future__ import annotations

import pytest

from sensevm.base.errors import SenseApprovalError
from sensevm.guard import provenance as P
from sensevm.guard.secondlook import _digest, _key

from tests.test_second_look import go  # noqa: F401  (the fixture: both tiers)

EXTRA = '''tool relay(s: String) returns String requires web.fetch:
    return s

tool other_page(url: String) returns String requires web.fetch:
    return "x@evil.example"

irreversible action notify(who: Map) requires email.send:
    print("notified " + str(len(who)))

tool send_all(to: Array) returns Int requires email.send:
    return len(to)

'''


def test_an_array_element_changed_after_a_passing_verify_asks_at_commit(go):
    # The relayed address is the program's own (a literal vouches): verify passes, and its
    # verdict is cached. The shared Array then gets the page's address: commit must look again.
    src = EXTRA + ('guests = [relay("a@corp.example")]\ninv = invite(guests)\ninv.verify()\n'
                   'print(inv.second_look)\nguests[0] = fetch_page("u")\n'
                   'test "commit":\n    inv.commit()\nprint(inv.state)\n'
                   'inv.approve()\ninv.commit()\nprint(inv.state)\n')
    out = go(src, page="x@evil.example")
    assert out.error is None, out.error
    assert isinstance(out.tests["commit"].error, SenseApprovalError)
    assert "x@evil.example" in out.tests["commit"].error.text
    assert out.lines[-4:] == ["nil", "verified", "invited 1", "committed"]
    assert [look["decision"] for look in out.looks] == ["pass", "ask", "ask"]


def test_a_map_value_changed_after_a_passing_verify_asks_at_commit(go):
    src = EXTRA + ('who = {"to": relay("a@corp.example")}\nn = notify(who)\nn.verify()\n'
                   'who["to"] = fetch_page("u")\ntest "commit":\n    n.commit()\n'
                   'print(n.state)\n')
    out = go(src, page="x@evil.example")
    assert out.error is None, out.error
    assert isinstance(out.tests["commit"].error, SenseApprovalError)
    assert out.lines[-1] == "verified"


def test_a_map_key_added_after_a_passing_verify_asks_at_commit(go):
    src = EXTRA + ('who = {"a@corp.example": 1}\nwho[relay("a@corp.example")] = 2\n'
                   'n = notify(who)\nn.verify()\nwho[fetch_page("u")] = 3\n'
                   'test "commit":\n    n.commit()\nprint(n.state)\n')
    out = go(src, page="x@evil.example")
    assert out.error is None, out.error
    assert isinstance(out.tests["commit"].error, SenseApprovalError)
    assert out.lines[-1] == "verified"


def test_an_approved_flag_then_a_nested_element_changed_asks_again(go):
    src = EXTRA + ('page = fetch_page("u")\nguests = [["a@corp.example", page]]\n'
                   'inv = invite(guests)\ninv.verify()\ninv.approve()\n'
                   'guests[0][1] = page + "m"\ntest "commit":\n    inv.commit()\n'
                   'print(inv.state)\ninv.approve()\ninv.commit()\nprint(inv.state)\n')
    out = go(src, page="x@evil.example")
    assert out.error is None, out.error
    assert isinstance(out.tests["commit"].error, SenseApprovalError)
    assert "x@evil.examplem" in out.tests["commit"].error.text
    assert out.lines[-3:] == ["verified", "invited 1", "committed"]


def test_the_same_text_from_another_origin_asks_again(go):
    # The approval is bound to the origins too: the same address, now from another tool.
    src = EXTRA + ('guests = [fetch_page("u")]\ninv = invite(guests)\ninv.verify()\n'
                   'inv.approve()\nguests[0] = other_page("v")\n'
                   'test "commit":\n    inv.commit()\nprint(inv.state)\n')
    out = go(src, page="x@evil.example")
    assert out.error is None, out.error
    assert isinstance(out.tests["commit"].error, SenseApprovalError)
    assert "other_page" in out.tests["commit"].error.text
    assert out.lines[-1] == "verified"


def test_the_same_arguments_again_still_ask_each_prepared_action(go):
    # A cached verdict carries no approval: each prepared call asks for itself.
    src = EXTRA + ('page = fetch_page("u")\nm = send_mail(page, "x")\nm.verify()\nm.approve()\n'
                   'm.commit()\nm2 = send_mail(page, "x")\nprint(attempt(m2))\n')
    out = go(src, page="x@evil.example")
    assert out.error is None, out.error
    assert isinstance(out.tests["commit"].error, SenseApprovalError)
    assert out.lines[-1] == "verified"
    assert [look["decision"] for look in out.looks] == ["ask"] * 4
    assert len({look["digest"] for look in out.looks}) == 1


def test_evidence_given_between_verify_and_commit_is_seen_at_commit(go):
    # Flagged at verify; then the user types that very address: commit sees the new evidence.
    src = EXTRA + ('m = send_mail(fetch_page("u"), "x")\nm.verify()\nprint(m.second_look != nil)\n'
                   'ask_human("to?")\nm.commit()\nprint(m.state)\n')
    out = go(src, page="x@evil.example", stdin="x@evil.example\n")
    assert out.error is None, out.error
    assert out.lines[-2:] == ["sent to x@evil.example", "committed"]
    assert [look["decision"] for look in out.looks] == ["ask", "pass"]


def test_an_outgoing_tool_call_with_a_changed_array_asks_again(go):
    # The approval covers exactly the refused call: the changed Array is refused; the very
    # call that was approved (same text, same origins) runs once; then it asks again.
    src = EXTRA + ('page = fetch_page("u")\nto = [page]\ntest "first":\n    send_all(to)\n'
                   'send_all.approve()\nto[0] = page + "m"\ntest "second":\n    send_all(to)\n'
                   'to[0] = other_page("v")\ntest "third":\n    send_all(to)\n'
                   'to[0] = page\nprint(send_all(to))\ntest "fourth":\n    send_all(to)\n')
    out = go(src, page="x@evil.example")
    assert out.error is None, out.error
    for name in ("first", "second", "third", "fourth"):
        assert isinstance(out.tests[name].error, SenseApprovalError), name
    assert out.lines[-1] == "1"


def test_the_audit_records_are_those_made_without_the_cache(go):
    # The cached detail is the JSON the record always had: same digest, stage by stage.
    src = EXTRA + ('page = fetch_page("u")\nfor i in range(3):\n'
                   '    m = send_mail(page, "x")\n    m.verify()\n    m.approve()\n'
                   '    m.commit()\n')
    out = go(src, page="x@evil.example")
    assert out.error is None, out.error
    assert [look["stage"] for look in out.looks] == ["verify", "commit"] * 3
    assert len({look["digest"] for look in out.looks}) == 1
    assert out.looks[0]["digest"] == _digest("send_mail", [
        P.LStr("x@evil.example", ((0, 14, P.only(P.untrusted("fetch_page"))),)), "x"])


def test_commit_reuses_the_verdict_of_verify_for_arguments_that_cannot_change(go, monkeypatch):
    # (issue 27) Scalar and String arguments cannot change between verify and commit: the
    # commit takes verify's verdict without making a key or looking in the cache; an Array
    # argument is looked at again (it can change: the tests above).
    from sensevm.guard import secondlook as SL
    calls = []
    real = SL.SecondLook._cached
    monkeypatch.setattr(SL.SecondLook, "_cached",
                        lambda self, d, args, stage: calls.append(stage) or real(self, d, args,
                                                                                 stage))
    src = EXTRA + ('page = fetch_page("u")\nfor i in range(3):\n'
                   '    m = send_mail(page, "x")\n    m.verify()\n    m.approve()\n'
                   '    m.commit()\nto = [page]\nsend_all.approve()\n'
                   'test "arr":\n    send_all(to)\n')
    out = go(src, page="x@evil.example")
    assert out.error is None, out.error
    assert calls == ["verify"] * 3 + ["call"]
    assert [look["stage"] for look in out.looks][:6] == ["verify", "commit"] * 3
    assert len({look["digest"] for look in out.looks[:6]}) == 1


@pytest.mark.parametrize("a, b", [
    (1, 1.0), (1, True), (0, False), (0.0, -0.0), ("1", 1), (None, "None"),
    ([1], (1,)), ([1, [2]], [1, 2]), ({"a": 1}, [("a", 1)]), ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
])
def test_keys_of_different_arguments_differ(a, b):
    ka, kb = _key([a]), _key([b])
    assert ka is None or kb is None or ka[0] != kb[0]


def test_keys_see_origins_and_spans():
    page = P.only(P.untrusted("page"))
    other = P.only(P.untrusted("other"))
    s1 = P.LStr("ab", ((0, 2, page),))
    s2 = P.LStr("ab", ((0, 2, other),))
    s3 = P.LStr("ab", ((0, 1, page),))
    keys = {_key([x])[0] for x in ("ab", s1, s2, s3)}
    assert len(keys) == 4
    assert _key([P.LInt(1, page)])[0] != _key([P.LInt(1, other)])[0] != _key([1])[0]
    assert _key([P.LFloat(1.0, page)])[0] != _key([P.LFloat(1.0, other)])[0]
    assert _key([P.LBool(True, page)])[0] != _key([P.LBool(True, other)])[0]
    assert _key([[s1]])[0] != _key([[s2]])[0]
    assert _key([{s1: 1}])[0] != _key([{s2: 1}])[0]


def test_cycles_and_unknown_values_are_not_cached():
    xs: list = []
    xs.append(xs)
    assert _key([xs]) is None
    assert _key([object()]) is None
    assert _key(["a", [1, {"k": [2.5]}]]) is not None
