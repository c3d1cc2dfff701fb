"""The second look's matching rules: roles, bounded email matching, phones, amounts, links, endorsement."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, strategies as st

from sensevm.endorse import (amount_in, as_amount, email_in, endorsed_by, find_amounts,
                             find_emails, find_phones, phone_in, role_of, url_in)
from sensevm.secondlook import is_outbound


@pytest.mark.parametrize("param, role", [
    ("to", "recipient"), ("CC", "recipient"), ("attendees", "recipient"), ("phone", "recipient"),
    ("amount", "amount"), ("total", "amount"), ("url", "link"), ("command", "code"),
    ("body", "content"), ("subject", "content"), ("destination", "content"),
])
def test_roles_from_parameter_names(param, role):
    assert role_of(param) == role


def test_a_declared_role_wins():
    assert role_of("destination", "recipient") == "recipient"


@pytest.mark.parametrize("cap, out", [
    ("email.send", True), ("sms.send", True), ("payment.transfer", True), ("http.post", True),
    ("shell.exec", True), ("calendar.invite", True), ("http.get", False), ("db.write", False),
    ("emailer.send", False), (None, False),
])
def test_outbound_capabilities(cap, out):
    assert is_outbound(cap) is out
    assert is_outbound(cap, sends=True) is True


@pytest.mark.parametrize("address, text, found", [
    ("sam@x.example", "please write to sam@x.example today", True),
    ("SAM@X.Example", "sam@x.example", True),
    ("am@x.example", "sam@x.example", False),             # not inside a longer local part
    ("am@x.example", "am@x.example.evil", False),         # not a prefix of a longer domain
    ("am@x.example.evil", "am@x.example", False),
    ("am@x.example", "am@x.example-evil.com", False),
    ("am@x.example", "(am@x.example).", True),            # punctuation around is fine
    ("arjun@example.com", "email Arjun the notes", False),  # no name rule
])
def test_bounded_email_matching(address, text, found):
    assert email_in(address, text) is found


ADDRESS = st.from_regex(r"[a-z]{1,6}@[a-z]{1,6}\.[a-z]{2,4}", fullmatch=True)


@given(ADDRESS, st.from_regex(r"[a-z0-9._%+-]{1,4}", fullmatch=True),
       st.from_regex(r"[a-z0-9]{1,4}", fullmatch=True))
def test_an_address_is_never_found_inside_a_longer_one(address, before, after):
    assert email_in(address, "to: " + address + ", thanks")
    assert not email_in(address, before + address)
    assert not email_in(address, address + "." + after)
    assert not email_in(address, address + "-" + after)


@pytest.mark.parametrize("number, text, found", [
    ("4155550100", "call me at +1 (415) 555-0100", True),
    ("+14155550100", "my number is 415.555.0100", True),      # same last ten digits
    ("4155550199", "call me at +1 (415) 555-0100", False),
    ("4155550100", "order 9941555501001 shipped", False),     # inside a longer digit run
    ("5550100", "ext 5550100", True),
    ("123", "123", False),                                    # too short to be a phone number
])
def test_phone_matching(number, text, found):
    assert phone_in(number, text) is found


def test_phone_numbers_are_found_with_their_separators():
    assert find_phones("a: +1 (415) 555-0100, b: 020 7946 0018") == ["14155550100",
                                                                    "02079460018"]


@pytest.mark.parametrize("text, amounts", [
    ("pay $1,200 please", [(Decimal("1200"), "USD")]),
    ("send 500 rupees", [(Decimal("500"), "INR")]),
    ("₹1,20,000 is the fee", [(Decimal("120000"), "INR")]),
    ("transfer 5000", [(Decimal("5000"), None)]),
    ("€12.50 and 3 EUR", [(Decimal("12.50"), "EUR"), (Decimal("3"), "EUR")]),
    ("version 1.2.3", []),
])
def test_amounts_are_found_as_decimals(text, amounts):
    assert find_amounts(text) == amounts


@pytest.mark.parametrize("value, text, found", [
    (1200, "You said: pay $1,200", True),
    ("1,200", "pay $1,200", True),
    (1200.0, "pay $1,200", True),
    (12000, "pay $1,200", False),
    ("500 INR", "send 500 rupees", True),
    ("500 USD", "send 500 rupees", False),                 # the currencies disagree
    (5000, "transfer 5000", True),
    (True, "transfer 1", False),
])
def test_amount_endorsement(value, text, found):
    assert amount_in(value, text) is found


def test_an_ambiguous_amount_string_is_not_an_amount():
    assert as_amount("$5 or $6") is None


@pytest.mark.parametrize("url, text, found", [
    ("HTTPS://Example.COM/Path?q=1", "see https://example.com/Path?q=1.", True),
    ("https://example.com/path", "see https://example.com/Path", False),
    ("https://example.com/a", "https://example.com/ab", False),
])
def test_links_match_by_scheme_and_host_then_exactly(url, text, found):
    assert url_in(url, text) is found


CLEAN = [("user", "email sam@x.example and call +1 (415) 555-0100 about the $1,200"),
         ("literal", "reports@acme.example"),
         ("trusted:lookup", "arjun.mehta@corp.example")]


@pytest.mark.parametrize("role, value, origin", [
    ("recipient", "sam@x.example", "user"),
    ("recipient", "reports@acme.example", "literal"),
    ("recipient", "arjun.mehta@corp.example", "trusted:lookup"),
    ("recipient", "sam@x.example, reports@acme.example", "user"),
    ("recipient", "4155550100", "user"),
    ("recipient", "am@x.example", None),
    ("recipient", "sam@x.example, x@evil.example", None),   # every recipient must be endorsed
    ("recipient", "nobody", None),
    ("amount", 1200, "user"),
    ("amount", 9999, None),
    ("link", "https://evil.example/x", None),
    ("content", "the $1,200", "user"),
])
def test_endorsement_names_the_span_that_vouches(role, value, origin):
    span = endorsed_by(role, value, CLEAN)
    assert (span[0] if span else None) == origin


def test_emails_are_extracted_lower_cased():
    assert find_emails("To: Ann@X.Example; cc bob@y.example.") == ["ann@x.example",
                                                                  "bob@y.example"]
