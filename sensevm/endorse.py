"""The second look's matching rules: which arguments are recipients, amounts or links, and when
a clean piece of text vouches for one.

Pure functions, no VM: the VM hands in the value of an argument and the spans of text that are
clean (the user's words, the program's literals, uninfluenced trusted results) and gets back
whether one of those spans endorses the value, and which. The rules are exact on purpose: an
email must match as a whole address (``am@x.example`` is not inside ``sam@x.example`` nor
``am@x.example.evil``), a phone number as a whole number (equal digits, or the same last ten
when both have ten or more), an amount as a decimal (separators stripped, currencies agreeing
when both are stated), a link by scheme and host case-insensitively and the rest exactly.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

# ----------------------------------------------------------------------------- roles

ROLE_BY_NAME = {
    **{n: "recipient" for n in ("to", "cc", "bcc", "recipient", "recipients", "email", "emails",
                                "phone", "attendees", "attendee")},
    **{n: "amount" for n in ("amount", "price", "total", "fee")},
    **{n: "link" for n in ("url", "link", "links")},
    **{n: "code" for n in ("code", "command", "script")},
}
ROLES = ("recipient", "amount", "link", "code", "content")


def role_of(param: str, override: str | None = None) -> str:
    """The role of a parameter: the declaration's override, else from its name, else content."""
    if override is not None:
        return override
    return ROLE_BY_NAME.get(param.lower(), "content")


# ----------------------------------------------------------------------------- email

_LOCAL = r"[A-Za-z0-9._%+-]"
_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])" + _LOCAL + r"+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}"
                    r"(?![A-Za-z0-9-])(?!\.[A-Za-z0-9])")


def find_emails(text: str) -> list[str]:
    """Every whole email address in ``text``, lower-cased."""
    return [m.group().lower() for m in _EMAIL.finditer(text)]


def email_in(address: str, text: str) -> bool:
    """Does ``text`` contain ``address`` as a whole address (a bounded, case-blind match)?"""
    return address.strip().lower() in find_emails(text)


# ----------------------------------------------------------------------------- phone

_PHONE = re.compile(r"(?<![\d+])\+?\(?\d[\d\s().-]{5,}\d(?!\d)")


def phone_digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def find_phones(text: str) -> list[str]:
    """The digits of every phone-like number (seven digits or more) in ``text``."""
    out = []
    for m in _PHONE.finditer(text):
        digits = phone_digits(m.group())
        if len(digits) >= 7:
            out.append(digits)
    return out


def same_phone(a: str, b: str) -> bool:
    a, b = phone_digits(a), phone_digits(b)
    if len(a) < 7 or len(b) < 7:
        return False
    if a == b:
        return True
    return len(a) >= 10 and len(b) >= 10 and a[-10:] == b[-10:]


def phone_in(number: str, text: str) -> bool:
    return any(same_phone(number, found) for found in find_phones(text))


# ----------------------------------------------------------------------------- amounts

_SYMBOLS = {"$": "USD", "€": "EUR", "£": "GBP", "₹": "INR", "¥": "JPY"}
_WORDS = {"usd": "USD", "dollar": "USD", "dollars": "USD", "eur": "EUR", "euro": "EUR",
          "euros": "EUR", "gbp": "GBP", "pound": "GBP", "pounds": "GBP", "inr": "INR",
          "rupee": "INR", "rupees": "INR", "rs": "INR", "jpy": "JPY", "yen": "JPY"}
_NUMBER = r"\d{1,3}(?:,\d{2,3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_AMOUNT = re.compile(
    r"(?P<sym>[$€£₹¥])\s?(?P<a>" + _NUMBER + r")"
    r"|(?<![\w.,])(?P<b>" + _NUMBER + r")(?![\w]|[.,]\d)(?:\s?(?P<word>[A-Za-z]{2,8}))?")


def _decimal(text: str) -> Decimal | None:
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None


def find_amounts(text: str) -> list[tuple[Decimal, str | None]]:
    """Every number in ``text`` as (value, currency or None): ``$1,200``, ``500 rupees``, ``12``."""
    out = []
    for m in _AMOUNT.finditer(text):
        if m.group("sym"):
            value, currency = _decimal(m.group("a")), _SYMBOLS[m.group("sym")]
        else:
            word = (m.group("word") or "").lower()
            value, currency = _decimal(m.group("b")), _WORDS.get(word)
        if value is not None:
            out.append((value, currency))
    return out


def as_amount(value) -> tuple[Decimal, str | None] | None:
    """An action's amount argument (Int, Float or a String such as ``"$1,200"``) as a decimal."""
    if type(value) is bool:
        return None
    if type(value) is int or type(value) is float:
        return Decimal(str(value)), None
    if type(value) is str:
        found = find_amounts(value)
        return found[0] if len(found) == 1 else None
    return None


def amount_in(value, text: str) -> bool:
    amount = as_amount(value)
    if amount is None:
        return False
    wanted, currency = amount
    for given, given_currency in find_amounts(text):
        if given == wanted and (currency is None or given_currency is None
                                or currency == given_currency):
            return True
    return False


# ----------------------------------------------------------------------------- links

_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s<>\"']+")


def normal_url(url: str) -> str:
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)(.*)$", url.strip())
    if not m:
        return url.strip()
    return f"{m.group(1).lower()}://{m.group(2).lower()}{m.group(3)}"


def find_urls(text: str) -> list[str]:
    return [normal_url(m.group().rstrip(".,;:!?)")) for m in _URL.finditer(text)]


def url_in(url: str, text: str) -> bool:
    return normal_url(url) in find_urls(text)


# ----------------------------------------------------------------------------- endorsement

def endorsed_by(role: str, value, clean: list) -> tuple | None:
    """The first clean span (origin, text) that vouches for ``value`` in ``role``, or None.

    ``clean`` lists (origin, text) pairs in order of precedence (user, literal, trusted). A
    recipient may be an email address or a phone number; a String holding several recipients
    (``"a@x.example, b@y.example"``) is endorsed only when each of them is.
    """
    if role == "amount":
        return next((span for span in clean if amount_in(value, span[1])), None)
    if type(value) is not str:
        return None
    if role == "link":
        return next((span for span in clean if url_in(value, span[1])), None)
    if role == "recipient":
        parts = find_emails(value) + find_phones(value)
        if not parts:
            return None
        found = None
        for part in parts:
            test = email_in if "@" in part else phone_in
            span = next((s for s in clean if test(part, s[1])), None)
            if span is None:
                return None
            found = found or span
        return found
    # code and content: only the whole value, verbatim, inside one clean span
    return next((span for span in clean if value and value in span[1]), None)


def recipients_in(text: str) -> list[str]:
    """Addresses and numbers inside any string argument of an outbound action (checked too)."""
    return find_emails(text) + find_phones(text)
