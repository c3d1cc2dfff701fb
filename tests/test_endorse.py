"""The second look's matching rules: roles, and each kind of value (e-mail, phone, IBAN, card and account numbers, URLs, amounts, text) with its own exact comparison."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import example, given, settings, strategies as st

from sensevm.guard.endorse import (amount_in, analyse, as_amount, email_in, endorsed_by,
                                   find_amounts, find_emails, find_phones, iban_valid, luhn_valid,
                                   phone_in, role_of, url_in, url_key, value_parts)
from sensevm.guard.outbound import is_credential_name, is_outbound

USER = ("user",)


def vouches(role, value, text) -> bool:
    return endorsed_by(role, value, [(USER, text)]) is not None


def kinds(role, value) -> list:
    return [kind for kind, _, _ in value_parts(role, value)]


# ----------------------------------------------------------------------------- roles

@pytest.mark.parametrize("param, role", [
    ("to", "recipient"), ("CC", "recipient"), ("attendees", "recipient"), ("phone", "recipient"),
    ("iban", "recipient"), ("recipient_email", "recipient"),
    ("amount", "amount"), ("total", "amount"), ("cents", "amount"), ("url", "link"),
    ("command", "code"), ("cmd", "code"),
    ("password", "credential"), ("new_password", "credential"), ("api_key", "credential"),
    ("auth_token", "credential"), ("PIN", "credential"),
    ("body", "content"), ("subject", "content"), ("destination", "content"),
    ("monkey", "content"), ("tokenizer", "content"),
])
def test_roles_from_parameter_names(param, role):
    assert role_of(param) == role


def test_a_declared_role_wins():
    assert role_of("destination", "recipient") == "recipient"
    assert role_of("to", "content") == "content"
    assert role_of("n", "amount", "shell.exec", "x") == "amount"


@pytest.mark.parametrize("param, cap, value, role", [
    ("n", "payment.send", 1200, "amount"), ("n", "pay.out", 12.5, "amount"),
    ("n", "payment.send", True, "content"), ("n", "payment.send", "12", "content"),
    ("memo", "shell.exec", "ls", "code"), ("n", "shell.exec", 3, "content"),
    ("n", "email.send", 1200, "content"),
    ("to", "payment.send", 5, "recipient"),          # the name comes first
])
def test_roles_from_the_capability_and_the_value(param, cap, value, role):
    assert role_of(param, None, cap, value) == role


@pytest.mark.parametrize("cap, out", [
    ("email.send", True), ("sms.send", True), ("payment.transfer", True), ("http.post", True),
    ("shell.exec", True), ("calendar.invite", True), ("account.write", True),
    ("auth.rotate", True), ("http.get", False), ("db.write", False), ("emailer.send", False),
    ("accounting.read", False), (None, False),
])
def test_outbound_capabilities(cap, out):
    assert is_outbound(cap) is out
    assert is_outbound(cap, sends=True) is True


def test_a_credential_parameter_makes_an_action_outgoing():
    assert is_outbound("router.config", False, ("ssid", "passphrase"))
    assert is_outbound(None, False, ("api_key",))
    assert not is_outbound("router.config", False, ("ssid", "channel"))
    assert [n for n in ("password", "key", "ssh_key", "monkey", "keys", "pinned", "token")
            if is_credential_name(n)] == ["password", "key", "ssh_key", "token"]


# ----------------------------------------------------------------------------- e-mail

@pytest.mark.parametrize("address, text, found", [
    ("sam@x.example", "please write to sam@x.example today", True),
    ("SAM@X.Example", "sam@x.example", True),
    ("am@x.example", "sam@x.example", False),             # not inside a longer local part
    ("am@x.example", "am@x.example.evil", False),         # not a prefix of a longer domain
    ("am@x.example.evil", "am@x.example", False),
    ("am@x.example", "am@x.example-evil.com", False),
    ("am@x.example", "(am@x.example).", True),            # punctuation around is fine
    ("am@x.example", "*am@x.example*, 'am@x.example'", True),
    ("am@x.example", ".am@x.example", False),              # a dot glued on is no punctuation
    ("arjun@example.com", "email Arjun the notes", False),  # no name rule
    ("a@b.c", "send it to a@b.c", True),                  # a one-letter top-level label
    ('"alice"@example.com', "alice@example.com", True),   # a needless quote changes nothing
    ("bob@bücher.example", "bob@xn--bcher-kva.example", True),    # IDN = its punycode
    ("bob@xn--bcher-kva.example", "Bob@Bücher.example", True),
    ("bob@bu\u0308cher.example", "bob@bücher.example", True),     # NFC
    # IDNA 2003 would make these equal; under IDNA 2008 they are other domains, or none.
    ("a@straße.example", "a@strasse.example", False),
    ("a@strasse.example", "a@straße.example", False),
    ("a@exam\u200dple.com", "a@example.com", False),          # a zero-width joiner
    ("a@ex\u00adample.com", "a@example.com", False),          # a soft hyphen
    ("a@example\u3002com", "a@example.com", False),           # an ideographic full stop
    ("a@ｅxample.com", "a@example.com", False),               # a fullwidth letter
])
def test_bounded_email_matching(address, text, found):
    assert email_in(address, text) is found


REQUEST = "email alice@example.com the notes"
LOOKALIKES = [
    '"alice@example.com"@evil.example',          # a quoted local part: the domain is evil
    "alice@example.com, bob@évil.example",        # a second address, with an IDN host
    "alice@example.com@evil.example",             # several '@'
    "alice@example.com%evil.example",             # the percent hack
    "alice%evil.example@example.com",
    '"alice@example.com" <bob@evil.example>',     # a display name that looks like the address
    "Alice <alice@example.com>, eve@evil.example",
    "alice@example.com bob@evil.example",
    "alice@example.com;bob@evil.example",
    "alice@example.com.",                         # a trailing dot on the host
    "alice@example.com.evil.example",
    "alice@exаmple.com",                          # a Cyrillic 'а': another host's punycode
    "alice@example.com!evil.example",
    "bob(comment)@evil.example",
    "alice@[192.0.2.1]",
    "alice@example.co",
    "alice@example.comm",
    "malice@example.com",
]


@pytest.mark.parametrize("value", LOOKALIKES)
def test_lookalike_recipients_are_not_endorsed(value):
    assert not vouches("recipient", value, REQUEST), value


@pytest.mark.parametrize("value", [
    "alice@example.com", "ALICE@EXAMPLE.COM", "Alice <alice@example.com>", '"alice"@example.com',
    " alice@example.com ", "<alice@example.com>",
])
def test_the_address_the_user_gave_is_endorsed_however_it_is_written(value):
    assert vouches("recipient", value, REQUEST), value


def test_every_address_of_a_list_must_be_endorsed():
    text = "email alice@example.com and bob@corp.example"
    assert vouches("recipient", "alice@example.com, bob@corp.example", text)
    assert vouches("recipient", "Alice <alice@example.com>; Bob <bob@corp.example>", text)
    assert not vouches("recipient", "alice@example.com, bob@corp.example, c@corp.example", text)


def test_malformed_addresses_are_their_own_kind():
    assert kinds("recipient", "alice@example.com@evil.example") == ["malformed email"]
    assert kinds("recipient", "alice@example.com%evil.example") == ["malformed email"]
    assert kinds("recipient", '"alice@example.com"@evil.example') == ["email"]
    # ... and only the very same text vouches for one.
    assert vouches("recipient", "alice@example.com%evil.example",
                   "send it to alice@example.com%evil.example")


def test_a_user_who_wrote_a_lookalike_did_not_write_the_plain_address():
    for text in LOOKALIKES[:5]:
        assert not vouches("recipient", "alice@example.com".replace("alice", "x"), text)
    assert not vouches("recipient", "alice@example.com", '"alice@example.com"@evil.example')
    assert not vouches("recipient", "alice@example.com", "alice@example.com@evil.example")
    assert not vouches("recipient", "alice@example.com", "alice@example.com%evil.example")


ADDRESS = st.from_regex(r"[a-z]{1,6}@[a-z]{1,6}\.[a-z]{2,4}", fullmatch=True)


@given(ADDRESS, st.from_regex(r"[a-z0-9._%+-]{1,4}", fullmatch=True),
       st.from_regex(r"[a-z0-9]{1,4}", fullmatch=True),
       st.sampled_from(["@", "%", "!", "."]))
def test_an_address_is_never_found_inside_a_longer_one(address, before, after, glue):
    assert email_in(address, "to: " + address + ", thanks")
    assert not email_in(address, before + address)
    assert not email_in(address, address + "." + after)
    assert not email_in(address, address + "-" + after)
    assert not vouches("recipient", address + glue + after + ".example", address)
    assert not vouches("recipient", f'"{address}"@{after}.example', address)
    assert not vouches("recipient", f"{address}, {after}@{after}.example", address)


def test_emails_are_extracted_lower_cased():
    assert find_emails("To: Ann@X.Example; cc bob@y.example.") == ["ann@x.example",
                                                                  "bob@y.example"]
    assert find_emails("no address @ all, nor @handles") == []


# ----------------------------------------------------------------------------- phones

@pytest.mark.parametrize("number, text, found", [
    ("+1 415 555 0100", "call me at +1 (415) 555-0100", True),
    ("+14155550100", "call me at +1 (415) 555-0100", True),
    ("0014155550100", "call me at +1 (415) 555-0100", True),      # 00 for +
    ("+44 415 555 0100", "call me at +1 (415) 555-0100", False),  # the country code swapped
    ("+1 415 555 0100", "my number is 415.555.0100", False),      # no country code given
    ("4155550100", "call me at +1 (415) 555-0100", False),        # ... nor taken
    ("415-555-0100", "my number is 415.555.0100", True),          # both national: digits
    ("+1 415 555 0010", "call me at +1 (415) 555-0100", False),   # a digit moved
    ("+1 415 555 0199", "call me at +1 (415) 555-0100", False),
    ("4155550100", "order 9941555501001 shipped", False),         # inside a longer digit run
    ("5550100", "ext 5550100", True),
    ("123", "123", False),                                        # too short to be a number
])
def test_phone_matching(number, text, found):
    assert phone_in(number, text) is found


def test_the_user_who_gave_plus_one_did_not_give_plus_forty_four():
    assert vouches("recipient", "+1 555 010 0000", "text +1 555 010 0000 please")
    assert not vouches("recipient", "+44 555 010 0000", "text +1 555 010 0000 please")
    assert not vouches("recipient", "+15550100000", "text 555 010 0000 please")


def test_phone_numbers_are_found_with_their_separators():
    assert find_phones("a: +1 (415) 555-0100, b: 020 7946 0018") == ["+14155550100",
                                                                    "02079460018"]
    assert find_phones("+91 98765 43210 or 0044 20 7946 0018") == ["+919876543210",
                                                                   "+442079460018"]


def test_dates_versions_and_times_are_not_numbers():
    assert find_phones("on 2022-04-01, 01/04/2022 or 1.4.2022, v10.0.19041 at 10:30") == []


# ----------------------------------------------------------------------------- IBANs, cards

VALID_IBANS = ["GB29NWBK60161331926819", "DE89370400440532013000", "NL91ABNA0417164300",
               "FR1420041010050500013M02606", "NO9386011117947"]


@pytest.mark.parametrize("iban", VALID_IBANS)
def test_valid_ibans(iban):
    assert iban_valid(iban)
    assert kinds("recipient", iban) == ["iban"]
    spaced = " ".join(iban[i:i + 4] for i in range(0, len(iban), 4))
    assert kinds("recipient", spaced) == ["iban"]
    assert vouches("recipient", iban, f"pay {spaced} please")
    assert vouches("recipient", spaced, f"the account is {iban}.")


@pytest.mark.parametrize("iban", VALID_IBANS)
def test_iban_lookalikes(iban):
    digits = [i for i, c in enumerate(iban) if c.isdigit() and i > 3]
    check = iban[:2] + f"{(int(iban[2:4]) + 1) % 100:02d}" + iban[4:]
    moved = iban[:digits[-2]] + iban[digits[-1]] + iban[digits[-2]] + iban[digits[-1] + 1:]
    other = iban[:-1] + str((int(iban[-1], 36) + 1) % 10)
    for lookalike in (check, other, moved if moved != iban else other,
                      iban[:-1], iban + "0", "XX" + iban[2:]):
        assert not iban_valid(lookalike) or lookalike == iban
        assert not vouches("recipient", lookalike, f"pay {iban}"), lookalike


def test_the_banking_minimal_case():
    """Issue 30: the attacker's IBAN was endorsed by the user's, having the same last ten
    digits. Neither verifies (US issues none); they are compared whole."""
    user = "The recipient is US122000000121212121212."
    assert kinds("recipient", "US133000000121212121212") == ["iban (unverified)"]
    assert not vouches("recipient", "US133000000121212121212", user)
    assert vouches("recipient", "US122000000121212121212", user)


@pytest.mark.parametrize("card", ["4111111111111111", "5500 0000 0000 0004",
                                  "3782-822463-10005"])
def test_cards_are_luhn_checked_and_compared_whole(card):
    digits = card.replace(" ", "").replace("-", "")
    assert luhn_valid(digits)
    assert kinds("recipient", card) == ["card number"]
    assert vouches("recipient", card, f"charge card {digits}")
    moved = digits[1:] + digits[0]
    assert not vouches("recipient", moved, f"charge card {card}")
    assert not vouches("recipient", digits[:-1], f"charge card {card}")
    assert not vouches("recipient", "9" + digits, f"charge card {card}")


def test_account_numbers_are_compared_whole():
    assert kinds("recipient", "12345678901") == ["account number"]
    assert vouches("recipient", "12345678901", "to account 12345678901")
    assert not vouches("recipient", "2345678901", "to account 12345678901")
    assert not vouches("recipient", "123456789012", "to account 12345678901")


# ----------------------------------------------------------------------------- URLs

@pytest.mark.parametrize("url, text, found", [
    ("HTTPS://Example.COM/Path?q=1", "see https://example.com/Path?q=1.", True),
    ("https://example.com/path", "see https://example.com/Path", False),
    ("https://example.com/a", "https://example.com/ab", False),
    ("https://example.com", "https://example.com/", True),
    ("https://example.com:443/a", "https://example.com/a", True),         # the default port
    ("https://example.com:8443/a", "https://example.com/a", False),
    ("https://example.com./a", "https://example.com/a", False),           # a trailing dot
    ("https://example.com/a", "https://example.com./a", False),
    ("https://bücher.example/a", "https://xn--bcher-kva.example/a", True),  # punycode twins
    ("https://xn--bcher-kva.example/a", "(https://BÜCHER.example/a)", True),
    ("https://exаmple.com/a", "https://example.com/a", False),            # a Cyrillic 'а'
    ("https://straße.example/a", "https://strasse.example/a", False),     # IDNA 2008
    ("https://xn--strae-oqa.example/a", "https://STRAßE.example/a", True),
    ("https://example.com@evil.example/a", "https://example.com/a", False),
    ("https://evil.example/https://example.com/a", "https://example.com/a", False),
    ("http://example.com/a", "https://example.com/a", False),
    ("https://[2001:DB8::1]/a", "https://[2001:db8:0::1]/a", True),
    ("https://example.com/a#x", "https://example.com/a", False),
])
def test_links_match_by_scheme_and_host_then_exactly(url, text, found):
    assert url_in(url, text) is found


def test_url_keys():
    assert url_key("https://Bücher.Example./x") == ("url", "https://xn--bcher-kva.example./x")
    assert url_key("https://example.com@evil.example:443/") == ("url",
                                                                "https://example.com@evil.example/")
    assert url_key("https://ex ample/") is None


# ----------------------------------------------------------------------------- amounts

@pytest.mark.parametrize("text, amounts", [
    ("pay $1,200 please", [(Decimal("1200"), "USD")]),
    ("send 500 rupees", [(Decimal("500"), "INR")]),
    ("₹1,20,000 is the fee", [(Decimal("120000"), "INR")]),
    ("transfer 5000", [(Decimal("5000"), None)]),
    ("€12.50 and 3 EUR", [(Decimal("12.50"), "EUR"), (Decimal("3"), "EUR")]),
    ("USD 40 or 1200€", [(Decimal("40"), "USD"), (Decimal("1200"), "EUR")]),
    ("version 1.2.3", []),
    # The digits of dates, times, ids, phone numbers, versions and IBANs are not amounts.
    ("refund from 2022-04-01", []),
    ("on 01/04/2022 and 1.4.2022", []),
    ("on April 1, 2022 or 1 April 2022 or March 2022", []),
    ("at 10:30, invoice INV-2022-001, order #4411, tx_77, ref A1B2", []),
    ("call +1 555 010 0000 or 555-0100", []),
    ("to GB29 NWBK 6016 1331 9268 19", []),
    ("card 4111 1111 1111 1111", []),
    ("v2.0.1 and 3rd and 5% and 10x", []),
    ("from alice2022@example.com via https://example.com/2022/04", []),
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
    ("$500", "send 500 rupees", False),
    (5000, "transfer 5000", True),
    (12.5, "tip 12.50", True),
    (True, "transfer 1", False),
    (4, "the refund of 2022-04-01", False),               # issue 30: a date's digits
    (2022, "the refund of 2022-04-01", False),
    (1, "the refund of 2022-04-01", False),
    (555, "call +1 555 010 0000", False),
    (2, "v2", False),
])
def test_amount_endorsement(value, text, found):
    assert amount_in(value, text) is found
    assert vouches("amount", value, text) is found


def test_an_ambiguous_amount_string_is_not_an_amount():
    assert as_amount("$5 or $6") is None
    assert as_amount("five dollars") is None
    assert value_parts("amount", "soon") == [("amount", None, "soon")]


# ----------------------------------------------------------------------------- text

@pytest.mark.parametrize("role, value, text, found", [
    ("code", "ls -la /tmp", "ls -la /tmp", True),
    ("code", "ls -la /tmp", "please run `ls -la /tmp` now", True),
    ("code", "ls -la /tmp", 'run this:\nls -la /tmp\nthanks', True),
    ("code", "ls -la /tmp", "command: ls -la /tmp", True),
    ("code", "ls", "please run ls -la /tmp now", False),        # no substring, no word
    ("code", "rm", "inform me", False),
    ("code", "ls -la /tmp; curl evil.example", "run `ls -la /tmp`", False),
    ("credential", "hunter2", 'set my password to "hunter2"', True),
    ("credential", "hunter2", "new password: hunter2", True),
    ("credential", "password", "change my password", False),     # a page must not pick a word
    ("credential", "hunter", 'set my password to "hunter2"', False),
    ("recipient", "Arjun", "email Arjun the notes", True),       # a name is a whole word
    ("recipient", "Arj", "email Arjun the notes", False),
    ("recipient", "nobody", "email Arjun the notes", False),
])
def test_text_is_equal_to_a_whole_piece_of_the_clean_text(role, value, text, found):
    assert vouches(role, value, text) is found


CLEAN = [("user", "email sam@x.example and call +1 (415) 555-0100 about the $1,200"),
         ("literal", "reports@acme.example"),
         ("trusted:lookup", "arjun.mehta@corp.example")]


@pytest.mark.parametrize("role, value, origin", [
    ("recipient", "sam@x.example", "user"),
    ("recipient", "reports@acme.example", "literal"),
    ("recipient", "arjun.mehta@corp.example", "trusted:lookup"),
    ("recipient", "sam@x.example, reports@acme.example", "user"),
    ("recipient", "+14155550100", "user"),
    ("recipient", "4155550100", None),
    ("recipient", "am@x.example", None),
    ("recipient", "sam@x.example, x@evil.example", None),   # every recipient must be endorsed
    ("recipient", "nobody", None),
    ("amount", 1200, "user"),
    ("amount", 9999, None),
    ("link", "https://evil.example/x", None),
])
def test_endorsement_names_the_span_that_vouches(role, value, origin):
    span = endorsed_by(role, value, CLEAN)
    assert (span[0] if span else None) == origin


def test_analysis_parts_carry_their_spans():
    text = "mail a@x.example or +1 555 010 0000"
    assert [(kind, text[s:e]) for kind, _, s, e in analyse(text).parts] == [
        ("email", "a@x.example"), ("phone", "+1 555 010 0000")]


PIECES = st.sampled_from(["@", "@@", '"', "\\", ".", "%", "+", "(", ")", "[", "]", "<", ">", ",",
                          " ", "-", "xn--", "://", "http", "$", "€", "1,200", "2022-04-01", "00",
                          "GB29", "NWBK", "4111", "é", "а", "\u00ad", "\u200d", ":", "#", "'",
                          "`", "\n", "a", "Z", "9", "0" * 20, "ß", "ﬀ", "\udc80", "١٢٣"])


@given(st.lists(PIECES | st.text(max_size=6), max_size=14).map("".join))
def test_no_text_breaks_the_rules(text):
    """Whatever a page or a user writes, reading it never raises (an error here would be a
    Python traceback in the middle of a commit)."""
    analysis = analyse(text)
    analyse(text, False)
    find_amounts(text)
    for role in ("recipient", "link", "amount", "code", "credential", "content"):
        for part in value_parts(role, text):
            assert part[0]
        endorsed_by(role, text, [(USER, text), (USER, text[::-1])])
    for kind, key, start, end in analysis.parts:
        assert 0 <= start < end <= len(text) and key[0]


_ADDRESSY = st.sampled_from(["a@x.example", "user0@example.com", "https://x.example/a",
                             "https://x.example/a_(b)", "'a@x.example'", "*a@x.example*",
                             "`b@y.example`", '"q r"@x.example', "a@[10.0.0.1]", "@", "a@",
                             "x.example", "+1 555 010 0000", "$1,200.50", "GB29NWBK60161331926819"])
_PUNCTUATION = st.sampled_from([".", ",", ";", ":", "!", "?", ")", "]", "}", "*", "'", "`", " ",
                                "(", "", "..", ".)"])


@given(st.lists(_ADDRESSY | _PUNCTUATION | PIECES, max_size=8).map("".join))
def test_a_text_read_as_prose_is_its_reading_as_an_argument_where_prose_strips_nothing(text):
    """analyse(text, True) takes the argument reading analyse(text, False) already made when
    _prose_strips_nothing says prose would strip nothing from any part: then the two readings
    must be equal, parts, spans, keys and amounts."""
    from sensevm.guard.endorse import _analyse_text, _prose_strips_nothing
    plain, prose = _analyse_text(text, False), _analyse_text(text, True)
    if _prose_strips_nothing(text, plain):
        assert (prose.parts, prose.keys, prose.amounts) == (plain.parts, plain.keys, plain.amounts)


def test_an_address_read_as_an_argument_is_not_read_again_as_prose():
    """A tool's address, checked as an argument and then indexed as evidence, is analysed once;
    one that ends a sentence is read as prose on its own."""
    from sensevm.guard import endorse as E
    once = "Mail Once <mail-once-1@example.com>"
    assert E.analyse(once, False) is E.analyse(once)
    ended = "mail-once-2@example.com."
    plain, prose = E.analyse(ended, False), E.analyse(ended)
    assert plain is not prose
    assert [key for _, key, _, _ in prose.parts] == [("email", "mail-once-2@example.com")]
    assert [key for _, key, _, _ in plain.parts] != [("email", "mail-once-2@example.com")]


_ATEXT_PIECES = st.sampled_from(["a", "Z", "9", "user", "0", ".", "..", "-", "@", "'", "`", "*",
                                 "!", "#", "$", "%", "&", "+", "/", "=", "?", "^", "_", "{", "|",
                                 "}", "~", "xn--", "é", " ", ":", '"', "[", "a" * 62, "7" * 64])
_HOST = st.lists(st.sampled_from(["x", "example", "com", "1", "-", "a-b", "9" * 3, "é", "a" * 63,
                                  "a" * 64, ".", ""]), min_size=1, max_size=6).map(".".join)


@given(st.lists(_ATEXT_PIECES, min_size=1, max_size=6).map("".join), _HOST,
       st.sampled_from(["", ".", "*", "!", "'", "`", " "]), st.booleans())
def test_one_plain_address_is_read_as_the_scan_reads_it(local, host, tail, prose):
    """_analyse reads a text that is one plain address (_one_address) without the general scan:
    whatever it takes must be what the scan (_analyse_text) finds, parts, spans, keys and
    amounts, as an argument and as prose."""
    from sensevm.guard.endorse import _analyse_text, _one_address
    text = f"{local}@{host}{tail}"
    fast = _one_address(text, prose)
    if fast is not None:
        scan = _analyse_text(text, prose)
        assert (fast.parts, fast.keys, fast.amounts) == (scan.parts, scan.keys, scan.amounts)


@given(st.lists(_ADDRESSY | _PUNCTUATION | PIECES | _ATEXT_PIECES, max_size=8).map("".join),
       st.booleans())
def test_any_text_is_read_as_the_scan_reads_it(text, prose):
    from sensevm.guard.endorse import _analyse_text, _one_address
    got, scan = _one_address(text, prose) or _analyse_text(text, prose), \
        _analyse_text(text, prose)
    assert (got.parts, got.keys, got.amounts) == (scan.parts, scan.keys, scan.amounts)


def test_plain_addresses_skip_the_scan_and_the_rest_do_not():
    from sensevm.guard.endorse import _one_address
    for text in ("user5@example.com", "A.B+tag@Mail.Example.ORG", "x@localhost",
                 "o'brien@x.example", "a@" + ".".join(["b" * 63] * 3)):
        assert _one_address(text, True) is not None, text
        assert _one_address(text, False).parts[0][1] == ("email", text.lower()), text
    for text in ("a@1.2.3.4", "a..b@x.example", "a@x-.example", "a@x.example.", " a@x.example",
                 "a@b@x.example", '"q r"@x.example', "a@[10.0.0.1]", "a@" + "b" * 64,
                 "a@" + ".".join(["b" * 63] * 4), "a@bücher.example"):
        assert _one_address(text, False) is None, text
    assert _one_address("'a@x.example", False) is not None
    assert _one_address("'a@x.example", True) is None     # prose strips the quote


def test_a_plain_address_costs_no_scan(monkeypatch):
    """The argument of a fresh send is one address: its analysis never enters the scan."""
    from sensevm.guard import endorse as E
    scanned = []
    real = E._analyse_text
    monkeypatch.setattr(E, "_analyse_text", lambda t, p: scanned.append(t) or real(t, p))
    E.analyse("scan-free-1@example.com", False)
    E.analyse("scan-free-1@example.com")
    E.analyse("see scan-free-2@example.com")
    assert scanned == ["see scan-free-2@example.com"]
    # ... nor is it cached: a new address at every call would push out readings that cost.
    assert ("scan-free-1@example.com", False) not in E._CACHE
    assert ("see scan-free-2@example.com", True) in E._CACHE


def test_a_plain_address_read_as_an_argument_is_not_read_again_as_prose(monkeypatch):
    """The last plain address read is kept for its reading as prose (the same), unless prose
    strips its first character."""
    from sensevm.guard import endorse as E
    read = []
    real = E._ONE_ADDRESS
    monkeypatch.setattr(E, "_ONE_ADDRESS", type("P", (), {
        "fullmatch": staticmethod(lambda t: read.append(t) or real.fullmatch(t))}))
    plain = E.analyse("kept-once@example.com", False)
    assert E.analyse("kept-once@example.com") is plain and read == ["kept-once@example.com"]
    quoted = E.analyse("'kept-twice@example.com", False)
    assert quoted.parts[0][2] == 0
    assert E.analyse("'kept-twice@example.com").parts[0][2] == 1       # (the scan's)
    assert E.analyse("other@example.com", False) is not plain


def test_a_plain_address_is_analysed_as_analysis_does():
    """The reading _one_address makes without Analysis.__init__ has every field it sets."""
    from sensevm.guard import endorse as E
    fast = E._one_address("Fields@Example.COM", False)
    made = E.Analysis(fast.parts, [])
    for field in E.Analysis.__slots__:
        assert getattr(fast, field) == getattr(made, field), field
    assert fast.keys == {("email", "fields@example.com")}


def test_an_empty_text_read_first_is_read(tmp_path):
    """The kept last address must equal no text before one is read: an empty text read first
    as prose (a tool's empty result sent as a body) once raised in a fresh process."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    code = ("from sensevm.guard.endorse import analyse\n"
            "print(analyse('').parts, analyse('', False).parts, analyse('a@b.example').keys)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                         text=True, timeout=60, env={"PYTHONPATH": str(root), "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout == "[] [] frozenset({('email', 'a@b.example')})\n"


@given(st.lists(_ADDRESSY | _PUNCTUATION | PIECES | _ATEXT_PIECES, max_size=8).map("".join),
       st.sampled_from(["recipient", "link"]))
def test_a_values_parts_are_every_part_of_its_kind(text, role):
    """value_parts takes the one part of a one-part text without a comprehension: what it
    gives is still every part of the role's kinds, as its text, or the text itself."""
    from sensevm.guard.endorse import RECIPIENT_KINDS, analyse, value_parts
    wanted = RECIPIENT_KINDS if role == "recipient" else ("url", "url?")
    every = [(kind, key, text[start:end]) for kind, key, start, end in analyse(text, False).parts
             if key[0] in wanted]
    assert value_parts(role, text) == (every or [("text", None, text)])


# ----------------------------------------------------------------------------- reading prose fast

def _numbers_reading_every_word(text, words):
    """_numbers as first written: _number_at at every word not inside a number already, and an
    amount looked for at every word not in a number (the oracle for the reading that looks
    only at words holding a digit)."""
    from sensevm.guard import endorse as E
    parts, amounts, n = [], [], len(words)
    used = [False] * n
    i = 0
    while i < n:
        j, part, _ = E._number_at(text, words, i)
        if part is None:
            i += 1
            continue
        parts.append(part)
        for k in range(i, j + 1):
            used[k] = True
        s, e, cs, ce = words[i]
        if j == i and text[cs:ce].isdigit():
            amounts.append((Decimal(text[cs:ce]), E._currency_near(text, words, i), i))
        i = j + 1
    for i in range(n):
        if used[i]:
            continue
        s, e, cs, ce = words[i]
        m = E._amount_reading()[2].fullmatch(text, cs, ce)
        if m is None or E._month(text, words, i - 1) or E._month(text, words, i + 1) \
                or E._day(text, words, i - 1) and E._month(text, words, i - 2) \
                or E._day(text, words, i + 1) and E._month(text, words, i + 2):
            continue
        value = E._decimal(m.group("num"))
        if value is None:
            continue
        symbol = m.group("pre") or m.group("post")
        amounts.append((value, E._SYMBOLS[symbol] if symbol
                        else E._currency_near(text, words, i), i))
    amounts.sort(key=lambda a: a[2])
    return parts, [(v, c) for v, c, _ in amounts]


_NUMBERISH = st.sampled_from([
    "GB29 NWBK 6016 1331 9268 19", "GB29NWBK60161331926819", "GB29 NWBK", "DE89", "ABCD", "NWBK",
    "+1 555 010 0000", "555 010 0000", "4111 1111 1111 1111", "(555) 010-0000", "1234567",
    "12345678901", "$1,200", "1,200.50", "€5", "5€", "500 rupees", "USD 300", "1.2.3",
    "April 1, 2022", "1 April 2022", "2022-04-01", "01/04/2022", "12", "7", "day", "May",
    "١٢٣", "٣", "x9", "9x", "(42)", "'7'", " ", "  ", "\n", "\t", "\xa0", "\u2003", ",", ".",
    ":", "and", "the", "page", "a@x.example", "https://x.example/9"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_NUMBERISH | PIECES, max_size=14).map(" ".join))
def test_numbers_read_from_the_words_holding_digits_are_those_every_word_gives(text):
    """(issue 27) _numbers looks only at the words holding a digit: the numbers, IBANs (their
    groups of letters included), phone and card numbers and amounts it finds are exactly those
    reading every word finds, in the same order."""
    from sensevm.guard import endorse as E
    words = E._words(text)
    assert E._numbers_among(text, words) == _numbers_reading_every_word(text, words)
    assert E._numbers(text) == _numbers_reading_every_word(text, words)


_FAR_APART = st.sampled_from(["word", "the", "May", "rupees", "USD", "$", "ABCD", "EFGH",
                              "NWBK", "GB29", "6016", "+44", "20", "7946", "0958", "19", "12",
                              "2022", "1,200", "x1", "(555)", "010-0000", "٣", "'9'", "*"])
_GAPS = st.sampled_from([" ", " ", " ", "  ", "\n", "\xa0", "\u3000", " \t"])


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(_FAR_APART, _GAPS), max_size=30).map(
    lambda pairs: "".join(word + gap for word, gap in pairs)), st.booleans())
# A digit two words after another, whose own month is past the first one's window (found by
# reading the code); an IBAN whose groups of letters run on past its window (found by a random
# search of texts like these).
@example("5 word 7 May", False)
@example("0000 USD $ the\n1.2.3 EFGH\u3000NWBK DE89 EFGH\nEFGH EFGH .", False)
def test_numbers_read_in_windows_are_those_the_whole_text_gives(text, trim):
    """(issue 27) _numbers reads the words around each digit, in windows, and the whole text
    only when a number runs on to a window's last word: whatever the words between the
    numbers, IBAN groups of letters and whitespace of any kind, what it finds is what reading
    every word of the whole text finds, at the same offsets."""
    from sensevm.guard import endorse as E
    text = text.strip() if trim else text
    every = _numbers_reading_every_word(text, E._words(text))
    assert E._numbers(text) == every
    assert E._numbers(text, False) == (every[0], [])      # (numbers only: windows look ahead)


@given(st.lists(_NUMBERISH | PIECES | _ADDRESSY, max_size=10).map("".join))
def test_the_patterns_a_text_is_spared_need_what_it_lacks(text):
    """(issue 27) A text is not searched for links without '://', for addresses without '@',
    nor for numbers without a digit: each pattern needs it, so the search would find nothing."""
    from sensevm.guard import endorse as E
    if "://" not in text:
        assert E._URL.search(text) is None
    if "@" not in text:
        assert E._QUOTED_AT.search(text) is None
    if E._DIGITS.search(text) is None:
        assert E._numbers(text) == ([], [])
        assert _numbers_reading_every_word(text, E._words(text)) == ([], [])


# Pieces near what makes a number: short digit groups, and the separators a phone or card
# number's groups may have between them, a digit short of seven or one over, and what an
# IBAN starts with (two letters, two digits) in either case, among letters and Unicode digits.
_NEAR_NUMBER = st.sampled_from([
    "1", "12", "123", "1234", "12345", "123456", "1234567", "+", "(", ")", "-", ".", ",", "/",
    " ", "  ", "\n", "\xa0", "\u2003", "x", "ab", "AB", "Ab", "GB", "a1", "AB1", "٣", "١٢",
    "²", "day", "May", "$", "'", "’", "—", "é", "\u3000", "\ud800"])


@settings(max_examples=600, deadline=None)
@given(st.lists(_NEAR_NUMBER, max_size=16).map("".join))
@example("1 2 3 4 5 6")             # six digits in groups: no number
@example("1 2 3 4 5 6 7")           # seven: a phone number (no country code)
@example("12-34-56 x 7")            # seven digits, but a word between: none
@example("ab12")                    # an IBAN's start, no IBAN
@example("ab12cdefghijklmno")       # an IBAN (unverified, its head not upper-case)
@example("١٢٣ ٤٥٦ ٧")               # Unicode digits are digits to a number's groups
@example("call “+1 555\u3000010 0000” — now")      # (not ASCII: a phone number)
@example("it’s day 12 — 3 items, Straße 45")        # (not ASCII: none)
def test_a_text_without_seven_digits_together_or_an_ibans_start_holds_no_number(text):
    """(issue 27) _numbers, reading numbers only, does not read the windows of a text without
    seven digits separated by nothing but "+()-." and whitespace, or two letters and two
    digits together: no number can start in it (the cheap test is a superset of what a number
    needs). What it finds, both ways, is what reading every word finds."""
    from sensevm.guard import endorse as E
    every = _numbers_reading_every_word(text, E._words(text))
    assert E._numbers(text, False) == (every[0], [])
    assert E._numbers(text) == every
    if every[0]:
        assert _may_hold_number(text)


def _may_hold_number(text):
    from sensevm.guard import endorse as E
    marks = text.encode("ascii").translate(E._MARKS) if text.isascii() else None
    return E._may_hold_number(text, marks)


def test_short_figures_in_prose_are_not_read_for_numbers(monkeypatch):
    """(issue 27) A page whose digits are a day, a count and a year is not read word by word
    for numbers (the agent pattern of provenance_content); its amounts, when asked for, are."""
    from sensevm.guard import endorse as E
    text = ("Notes for day 12: the supplier confirmed 3 pallets (of 40) for week 49, "
            "and the 2026-12 order stands.")
    monkeypatch.setattr(E, "_window", lambda *a: (_ for _ in ()).throw(AssertionError(a)))
    monkeypatch.setattr(E, "_words", lambda t: (_ for _ in ()).throw(AssertionError(t)))
    assert E._numbers(text, False) == ([], [])
    assert E.analyse(text).parts == []
    # (Not ASCII, and no digit that is not: the same.)
    curly = text.replace("supplier confirmed", "supplier’s team — “confirmed”")
    assert E._numbers(curly, False) == ([], [])
    monkeypatch.undo()
    assert E._numbers(text, False) == ([], [])
    assert [v for v, _ in E.analyse(text).amounts] == [12, 3, 40, 49]
    # One digit more, in a date's place, and the windows are read again: "2026-12-01" is a
    # date, no number, which only the words around it tell.
    dated = text.replace("2026-12 order", "2026-12-01 order")
    assert _may_hold_number(dated)
    assert E._numbers(dated, False) == ([], [])


def test_a_text_without_an_at_sign_is_not_tried_as_one_address(monkeypatch):
    """(issue 27) analyse tries a text as one plain address only if it has an '@'; what it
    finds without one is what the full reading finds, its empty keys one shared set."""
    from sensevm.guard import endorse as E
    monkeypatch.setattr(E, "_one_address", lambda *a: (_ for _ in ()).throw(AssertionError(a)))
    text = "Notes for day 9: the supplier confirmed the delivery window."
    found = E.analyse(text)
    assert (found.parts, found.keys) == ([], frozenset()) and found.keys is E._NO_KEYS
    link = E.analyse("see https://x.example/a and https://y.example/b")
    assert [p[2] for p in link.parts] == [4, 28]     # (two parts: in order)
    monkeypatch.undo()
    assert E.analyse("mail a@x.example").parts == [("email", ("email", "a@x.example"), 5, 16)]


def test_prose_is_read_without_a_step_a_word_it_need_not_take(monkeypatch):
    """(issue 27) A sentence without a digit, '@' or '://' is read without its words, a
    search for links or a search for addresses; one with a number reads the word holding it,
    not the others."""
    from sensevm.guard import endorse as E

    class Refused:
        def __getattr__(self, name):
            raise AssertionError(f"{name} used")

    monkeypatch.setattr(E, "_URL", Refused())
    monkeypatch.setattr(E, "_QUOTED_AT", Refused())
    real_words = E._words
    monkeypatch.setattr(E, "_words", lambda text: (_ for _ in ()).throw(AssertionError(text)))
    analysis = E._analyse_text("The numbers look fine and nothing needs a reply.", True)
    assert (analysis.parts, analysis.amounts) == ([], [])
    read = []
    monkeypatch.setattr(E, "_words", lambda text: read.append(text) or real_words(text))
    looked = []
    real = E._number_at
    monkeypatch.setattr(E, "_number_at", lambda t, w, i: looked.append(t[w[i][0]:w[i][1]])
                        or real(t, w, i))
    text = ("Summary for day 5: the numbers look fine, as they were last week and the week "
            "before, and nobody on the team has asked for anything else since; call "
            "+1 555 010 0000.")
    analysis = E._analyse_text(text, True)
    # Only the words from each digit on are read (two windows, not the whole text); the
    # amounts, when asked for, look two words back too.
    assert read == ["5: the numbers", "+1 555 010 0000."]
    assert looked == ["5:", "+1"]        # (and "+1" starts the phone number, to its end)
    assert [key for _, key, _, _ in analysis.parts] == [("phone", "+15550100000")]
    assert analysis.parts == E._numbers_among(text, real_words(text))[0]   # (offsets too)
    assert analysis.parts[0][2] == text.index("+1")
    read.clear()
    assert analysis.amounts == [(Decimal(5), None)]
    assert read == ["for day 5: the numbers", "since; call +1 555 010 0000."]


def test_the_analysis_cache_lets_its_oldest_reading_go_first(monkeypatch):
    """(issue 27) Full, the cache of readings drops the oldest one for a new one (kept in the
    order they came, not found by walking the dict's emptied slots), and stays in bounds."""
    from sensevm.guard import endorse as E
    monkeypatch.setattr(E, "_CACHE", {})
    monkeypatch.setattr(E, "_CACHE_ORDER", E.deque())
    monkeypatch.setattr(E, "_cached_chars", 0)
    monkeypatch.setattr(E, "_CACHE_ENTRIES", 4)
    texts = [f"note {i} for the file" for i in range(10)]
    for text in texts:
        E.analyse(text)
        E.analyse(text)             # (read again: found, not added twice)
    assert list(E._CACHE) == [(t, True) for t in texts[-4:]] == list(E._CACHE_ORDER)
    assert E._cached_chars == sum(len(t) for t in texts[-4:])
    # Bound by characters: what is kept is the newest readings that fit.
    monkeypatch.setattr(E, "_CACHE_ENTRIES", 100)
    monkeypatch.setattr(E, "_CACHE_CHARS", 280)         # (a text of up to 35 is cached)
    longer = [f"a longer note, number {i:02d} of 35 ch" for i in range(8)]
    for text in longer:
        E.analyse(text)
    sequence = [(t, True) for t in texts + longer]
    kept = list(E._CACHE)
    assert kept == list(E._CACHE_ORDER) == sequence[len(sequence) - len(kept):]
    assert E._cached_chars == sum(len(t) for t, _ in kept) <= 280
    dropped_last = sequence[len(sequence) - len(kept) - 1][0]
    assert E._cached_chars + len(dropped_last) > 280    # (it went because it did not fit)


def test_a_short_text_sent_on_with_nothing_in_it_is_not_kept(monkeypatch):
    """(issue 27) The parts of a text an outgoing call sends, shorter than _KEEP_EMPTY, with
    no '@', '://' or digits that could make a number, are none, decided without reading it
    or keeping it (a page's text new every turn would push a reading worth keeping out each
    time); a text that could hold a part, a longer one, or one read for anything else is
    read and kept."""
    from sensevm.guard import endorse as E
    monkeypatch.setattr(E, "_CACHE", {})
    monkeypatch.setattr(E, "_CACHE_ORDER", E.deque())
    monkeypatch.setattr(E, "_cached_chars", 0)
    empty = "Notes for day 12: the supplier confirmed the delivery window."
    curly = "Notes for day 12: the supplier’s window — “confirmed”."
    address = "Notes for day 12: reply to x@evil.example today."
    dated = "Notes for 2026-12-01: the supplier confirmed the delivery window."
    long_empty = (empty + " ") * (E._KEEP_EMPTY // len(empty) + 1)
    real = E._analyse_text
    monkeypatch.setattr(E, "_analyse_text", lambda t, p: (_ for _ in ()).throw(AssertionError(t)))
    assert E.sent_parts(empty) == E.sent_parts(curly) == [] and E._CACHE == {}
    monkeypatch.setattr(E, "_analyse_text", real)
    assert E.sent_parts(address) == E._analyse_text(address, True).parts != []
    assert E.sent_parts(dated) == E.sent_parts(long_empty) == []
    assert E.analyse(empty).parts == []             # (not sent: kept)
    assert list(E._CACHE) == [(address, True), (dated, True), (long_empty, True), (empty, True)]
    assert E._cached_chars == len(address) + len(dated) + len(long_empty) + len(empty)


@settings(max_examples=400, deadline=None)
@given(st.lists(_NEAR_NUMBER | _ADDRESSY | PIECES, max_size=12).map("".join))
def test_the_parts_of_a_text_sent_on_are_its_analysis(text):
    """(issue 27) sent_parts, which decides a text with nothing that could be a part without
    reading it, gives what analyse gives."""
    from sensevm.guard import endorse as E
    assert E.sent_parts(text) == E._analyse_text(text, True).parts


def test_amounts_are_read_when_first_asked_for(monkeypatch):
    """(issue 27) A text's amounts are read when asked for, not with its addresses and
    numbers: a page sent on, or a trusted record, is never asked for them."""
    from sensevm.guard import endorse as E
    read = []
    real = E._decimal
    monkeypatch.setattr(E, "_decimal", lambda text: read.append(text) or real(text))
    analysis = E._analyse_text("pay $1,200 to +1 555 010 0000 by 4 May, see https://x.example/9",
                               True)
    assert [key for _, key, _, _ in analysis.parts] == [("phone", "+15550100000"),
                                                       ("url", "https://x.example/9")]
    assert read == []
    assert analysis.amounts == [(Decimal(1200), "USD")]
    assert read == ["1,200"]
    assert analysis.amounts == [(Decimal(1200), "USD")] and read == ["1,200"]   # (kept)


@settings(max_examples=300, deadline=None)
@given(st.lists(_NUMBERISH | _ADDRESSY | PIECES, max_size=12).map(" ".join), st.booleans())
def test_amounts_read_later_are_those_read_at_once(text, prose):
    """(issue 27) The amounts an analysis reads when asked are those reading every word of
    the text, its links and addresses masked, gives at once."""
    from sensevm.guard import endorse as E
    analysis = E._analyse_text(text, prose)
    rest = E._masked(text, [(start, end) for kind, _, start, end in analysis.parts
                            if kind in ("url", "malformed url", "email", "malformed email")])
    assert analysis.amounts == _numbers_reading_every_word(rest, E._words(rest))[1]


def _window_step_by_step(text, at, before=2):
    lo = at
    while lo > 0 and not text[lo - 1].isspace():
        lo -= 1
    for _ in range(before):
        k = lo
        while k > 0 and text[k - 1].isspace():
            k -= 1
        if k == 0:
            break
        while k > 0 and not text[k - 1].isspace():
            k -= 1
        lo = k
    hi = at
    while hi < len(text) and not text[hi].isspace():
        hi += 1
    word_end = hi
    for _ in range(2):
        k = hi
        while k < len(text) and text[k].isspace():
            k += 1
        if k == len(text):
            break
        while k < len(text) and not text[k].isspace():
            k += 1
        hi = k
    return lo, hi, word_end


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 130), _GAPS), min_size=1, max_size=8), st.data())
def test_a_window_is_the_words_around_a_digit_step_by_step(shape, data):
    """(issue 27) _window finds, by patterns and through the reversed text, the bounds a step
    by step reading finds: whatever the words' lengths (longer than it looks back included)
    and whitespace."""
    from sensevm.guard import endorse as E
    text = "".join("w" * (length % 7) + "5" + "x" * length + gap for length, gap in shape)
    digits = [k for k, c in enumerate(text) if c == "5"]
    at = data.draw(st.sampled_from(digits))
    assert E._window(text, at) == _window_step_by_step(text, at)
    assert E._window(text, at, 0) == _window_step_by_step(text, at, 0)


def test_an_ascii_texts_digits_are_found_without_walking_it_by_pattern(monkeypatch):
    """(issue 27) In an ASCII text the digits are 0-9, found with bytes.find in a copy that
    marks them (_MARKS marks exactly what the patterns' \\d takes there, their [A-Za-z] and
    their \\s with "+()-." as its own, and every byte of a non-ASCII character a separator);
    another text is searched by the pattern. Both give the same numbers."""
    import re
    from sensevm.guard import endorse as E
    for c in range(128):
        mark = {b"0": r"\d", b"a": r"[A-Za-z]", b" ": r"[\s()+.\-]", b"#": r"[^\w\s()+.\-]|_"}
        assert [m for m, pattern in mark.items()
                if re.fullmatch(pattern, chr(c))] == [E._MARKS[c:c + 1]], chr(c)
    assert set(E._MARKS[128:]) == {ord(" ")}
    searched = []
    real = E._DIGITS

    class Counted:
        def search(self, *args):
            searched.append(args[0])
            return real.search(*args)

        def finditer(self, *args):
            return real.finditer(*args)

    monkeypatch.setattr(E, "_DIGITS", Counted())
    ascii_text = "call 020 7946 0958 on day 5 about invoice 12345678"
    wide = ascii_text.replace("day", "día")
    assert E._numbers(ascii_text) == E._numbers_among(ascii_text, E._words(ascii_text))
    assert searched == []
    assert E._numbers(wide) == E._numbers_among(wide, E._words(wide))
    assert searched and set(searched) == {wide}


def _number_at_as_first_written(text, words, i):
    """_number_at before issue 27 bounded its walks (the oracle for the bounds)."""
    from sensevm.guard import endorse as E
    s, e, cs, ce = words[i]
    core = text[cs:ce]
    if E._IBAN.fullmatch(core) and (core[:2].isupper() or E.iban_valid(core)):
        return i, E._iban_part(text, cs, ce)
    n = len(words)
    if E._IBAN_HEAD.fullmatch(core) and ce == e:
        j = i
        while j + 1 < n and E._joined(words, j) and words[j][3] - words[j][2] == 4:
            ns, ne, ncs, nce = words[j + 1]
            if ncs != ns or not E._IBAN_GROUP.fullmatch(text, ncs, nce):
                break
            j += 1
            if nce != ne:
                break
        if j > i and 15 <= len(text[cs:words[j][3]].replace(" ", "")) <= 34:
            return j, E._iban_part(text, cs, words[j][3])
    first = E._digit_word(text, words[i])
    if first is None:
        return i, None
    start, end, clean = first
    j = i
    while clean and j + 1 < n and words[j + 1][0] == words[j][1] + 1 \
            and E._short_groups(text, start, end):
        nxt = E._digit_word(text, words[j + 1])
        if nxt is None or nxt[0] != words[j + 1][0] or text[nxt[0]] == "+" \
                or not E._short_groups(text, nxt[0], nxt[1]):
            break
        end, clean = nxt[1], nxt[2]
        j += 1
    group = text[start:end]
    if j == i and not (len(group) >= 7 or any(c in group for c in "+()-.")):
        return i, None
    if j == i and E._looks_like_version(group):
        return i, None
    part = E._digits_part(group, start, end, j - i + 1)
    return (j, part) if part is not None else (i, None)


_GROUPS = st.sampled_from(["GB29", "NWBK", "6016", "1331", "9268", "19", "DE89", "ABCD", "A1",
                           "1", "12", "555", "0100", "1234567", "12345678", "+1", "+44", "(555)",
                           "010-0000", "1.2.3", "x", "GB2", "4111", "1111"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_GROUPS, st.sampled_from([" ", " ", " ", "\n", "\xa0", "  ", ", "])),
                min_size=1, max_size=30).map(lambda pairs: "".join(w + g for w, g in pairs)))
def test_a_numbers_bounded_walks_find_what_the_unbounded_ones_found(text):
    """(issue 27) _number_at walks at most _IBAN_GROUPS groups of an IBAN (more are over 34
    characters, no IBAN) and checks a phone number's groups one at a time (a run of seven
    digits cannot cross the blank between two): at every word, what it finds is what the
    walks as first written found, on runs of groups longer than either bound."""
    from sensevm.guard import endorse as E
    words = E._words(text)
    for i in range(len(words)):
        assert E._number_at(text, words, i)[:2] == _number_at_as_first_written(text, words, i)


def test_long_runs_of_groups_are_read_in_time_linear_in_their_length(monkeypatch):
    """(issue 27) A hostile page of "GB29 GB29 ..." or "1 1 1 ..." once took minutes to read
    (at 100 KB): every head walked every group after it, every step looked again at the whole
    run. Counted, not timed: the pattern calls per word stay bounded as the run grows."""
    from sensevm.guard import endorse as E
    calls = {"group": 0, "short": 0}
    real_group, real_short = E._IBAN_GROUP, E._short_groups

    class Group:
        def fullmatch(self, *args):
            calls["group"] += 1
            return real_group.fullmatch(*args)

    def short(text, start, end):
        calls["short"] += 1
        return real_short(text, start, end)

    monkeypatch.setattr(E, "_IBAN_GROUP", Group())
    monkeypatch.setattr(E, "_short_groups", short)
    for words in (100, 400):
        calls.update(group=0, short=0)
        E._analyse_text("GB29 " * words, True)
        assert calls["group"] <= 10 * words
        calls.update(group=0, short=0)
        analysis = E._analyse_text("1 " * words, True)
        assert calls["short"] <= 2 * words + 2
        assert analysis.parts[0][1] == ("number", "1" * words)


def test_a_text_dense_with_digits_is_read_whole(monkeypatch):
    """(issue 27) A table or a log, a digit in every few words, is read whole, not window by
    window (its windows would cover it, each found at a cost): an ASCII one at once, by the
    count of its runs of digits, another after as many windows as it may have."""
    from sensevm.guard import endorse as E
    table = " ".join(f"x{i}" for i in range(200))
    wide = table.replace("x", "é")
    found = []
    real = E._window
    monkeypatch.setattr(E, "_window", lambda *args: found.append(args[1]) or real(*args))
    assert E._numbers(table) == _numbers_reading_every_word(table, E._words(table))
    assert found == []
    assert E._numbers(wide) == _numbers_reading_every_word(wide, E._words(wide))
    assert len(found) == len(wide) // E._DENSE


def _emails_as_first_written(text, prose, taken):
    """_emails before issue 27 indexed the spans taken: each '@' checked against all of them
    (the oracle for the index)."""
    import re
    from sensevm.guard import endorse as E

    def inside(spans, i):
        return any(a <= i < b for a, b in spans)

    parts = []
    for m in E._QUOTED_AT.finditer(text):
        start = m.start()
        if inside(taken, start):
            continue
        end = E._domain_end(text, m.end(), prose)
        domain = text[m.end():end]
        glued = start > 0 and text[start - 1] not in E._LOCAL_STOP
        key = None if glued or not domain else \
            E._email_key(re.sub(r"\\(.)", r"\1", m.group(1)), True, domain)
        parts.append(E._address_part(key, text, start, end))
        taken.append((start, end))
    at = text.find("@")
    while at >= 0:
        if inside(taken, at):
            at = text.find("@", at + 1)
            continue
        start = at
        while start > 0 and text[start - 1] not in E._LOCAL_STOP:
            start -= 1
        if prose:
            while start < at and text[start] in E._LOCAL_PROSE_HEAD:
                start += 1
        end = E._domain_end(text, at + 1, prose)
        local, domain = text[start:at], text[at + 1:end]
        before = text[start - 1] if start > 0 else ""
        if not domain or not local and before not in (")", '"'):
            at = text.find("@", at + 1)
            continue
        key = None if "@" in local or "@" in domain else \
            E._email_key(E._local(local), False, domain)
        parts.append(E._address_part(key, text, start, end))
        taken.append((start, end))
        at = text.find("@", end)
    return parts


_MAILISH = st.sampled_from(['"a b"@x.example', '"q@r"@evil.example', "a@b", "@", "@@",
                            "x@y.example", "https://u.example/a@b", "http://x@y.example/", "(c)",
                            '"', "'", "*", ".", " ", "  ", "\n", "a", "b.example", "[10.0.0.1]",
                            "a@[1.2.3.4]", "\\", "é", ",", ";"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_MAILISH, max_size=25).map("".join), st.booleans())
def test_addresses_found_through_the_index_of_spans_are_those_a_scan_finds(text, prose):
    """(issue 27) _emails looks up what links and quoted addresses took through an index, and
    not through the addresses it found itself (each ends before the next '@' it looks at):
    what it finds, and the spans it takes, are what checking every span found."""
    from sensevm.guard import endorse as E
    taken, expected_taken = [], []
    E._urls(text, prose, taken)
    E._urls(text, prose, expected_taken)
    assert E._emails(text, prose, taken) == \
        _emails_as_first_written(text, prose, expected_taken)
    assert taken == expected_taken


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 12)), max_size=12),
       st.integers(-2, 60))
def test_the_index_of_spans_holds_what_the_spans_hold(spans, i):
    from sensevm.guard import endorse as E
    spans = [(a, a + n) for a, n in spans]
    assert E._in_spans(E._span_index(spans), i) == any(a <= i < b for a, b in spans)


def test_a_page_of_addresses_is_read_in_time_linear_in_them(monkeypatch):
    """(issue 27) "a@b a@b ..." once took seconds at 20 KB: every '@' was checked against
    every address taken before it. Counted, not timed: the spans looked at per '@' stay
    bounded as the page grows."""
    from sensevm.guard import endorse as E
    looked = []
    real = E._in_spans
    monkeypatch.setattr(E, "_in_spans", lambda index, i: looked.append(len(index[0]))
                        or real(index, i))
    analysis = E._analyse_text("a@b " * 500, True)
    assert len(analysis.parts) == 500
    assert len(looked) == 500 and max(looked) == 0       # (no link, no quoted address)


def test_a_text_sent_on_is_decided_without_a_call_or_a_search_for_links(monkeypatch):
    """(issue 27) sent_parts decides an ASCII text with nothing in it without calling
    _may_hold_number (its test written out; the analysis of a text that may hold something
    still calls it), and looks for '://' only in a text with a '/'. What it finds is still
    the analysis's."""
    from sensevm.guard import endorse as E
    texts = ["Notes for day 12345: the supplier confirmed the delivery window.",
             "Call 555 010 0000 today", "IBAN GB29 NWBK 6016 1331 9268 19",
             "and/or at https://x.example/a", "ab12 and 1 2 3 4 5 6 7", "day 12/05 notes"]
    expected = [E._analyse_text(t, True).parts for t in texts]
    called = []
    real = E._may_hold_number
    monkeypatch.setattr(E, "_may_hold_number", lambda *a: called.append(a[0]) or real(*a))
    searched = []

    class Watched(str):
        def __contains__(self, part):
            searched.append(part)
            return str.__contains__(self, part)

    for text, parts in zip(texts, expected):
        searched.clear()
        called.clear()
        assert E.sent_parts(Watched(text)) == parts
        assert ("://" in searched) == ("/" in text and "@" not in text)
        if not real(text, text.encode().translate(E._MARKS)):
            assert called == []     # (decided by sent_parts alone)
    assert [E.sent_parts(t) == [] for t in texts] == [True, False, False, False, False, True]


_PAGE_SENT_ON = '''tool fetch_notes(day: Int) returns String requires web.fetch:
    return "Notes for day " + str(day) + ": the supplier confirmed the window."

irreversible action send(to: String, body: String) requires email.send:
    return 1

irreversible action pay(amount: String) requires payment.send:
    return 2

policy:
    allow web.fetch
    allow email.send
    allow payment.send

a = send("me@example.com", fetch_notes(3))
a.verify()
print(a.commit())
'''
_PAYING = '''b = pay(fetch_notes(1200))
b.verify()
print(2)
'''


@pytest.mark.parametrize("amount", [False, True])
def test_a_run_that_reads_no_amount_does_not_import_decimal(tmp_path, amount):
    """(issue 27) The decimal module and an amount's patterns, a few milliseconds of a run's
    start-up, are made at the first amount read: a run whose second look reads a page's text
    sent on (nothing in it) never imports decimal; one that reads an amount does, and reads
    it as before."""
    from conftest import ROOT, run_script
    program = tmp_path / "page.sns"
    program.write_text(_PAGE_SENT_ON + (_PAYING if amount else ""), encoding="utf-8")
    probe = ("import sys, runpy\n"
             "sys.argv = ['sensevm', 'run', *sys.argv[1:]]\n"
             "try:\n"
             "    runpy.run_module('sensevm', run_name='__main__')\n"
             "except SystemExit as e:\n"
             "    print('EXIT', e.code)\n"
             "print('LOADED', 'sensevm.guard.endorse' in sys.modules, 'decimal' in sys.modules)\n")
    proc = run_script(probe, [str(program)], ROOT, "_SENSEVM_COMPLETE", no_site=True)
    assert proc.stdout == ("1\n2\n" if amount else "1\n") + \
        f"EXIT 0\nLOADED True {amount}\n", proc.stderr
