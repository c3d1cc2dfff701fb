"""The second look's matching rules: what kind of value an argument holds, and whether a clean piece of text holds an equal value of the same kind.

Pure functions, no VM: secondlook.py hands in an argument (or the text of an influenced span)
and the clean texts that may vouch for it (the user's words, the program's constants, trusted
records), and gets back, per value found, its kind and the clean text that holds an equal one.

Every comparison is whole and exact for its kind; there is no suffix, prefix or substring rule:

* **email**: read RFC 5322-aware -- a dot-atom or quoted local part, a domain (IDN labels as
  punycode) or a domain literal; several addresses in one string are each a value. The local
  part is compared case-blind. A second unquoted ``@``, a ``%`` or any other character glued
  to the domain makes the token a *malformed* address, equal only to the same text.
* **phone**: E.164, written with ``+`` (or ``00``) and the country code: equal digits,
  country code included. A number written without a country code is a digit string.
* **number**: digit strings (account and card numbers, phone numbers without a country code;
  Luhn tells a card): equal digits, compared whole.
* **iban**: country, length and ISO 13616 mod-97 check digits verified (an IBAN-shaped value
  that fails them is still compared whole, and said to be unverified).
* **url**: scheme and host case-blind, an IDN host as punycode, an IP host normalised, a
  default port dropped; user, path, query and fragment exact. A trailing dot on a host, or a
  look-alike host (its punycode differs), is another host.
* **amount**: a decimal, with its currency when stated; the digits of dates, times, versions,
  ids, phone, card and account numbers are not amounts.
* **text** (code, credentials, recipients of no known kind): equal to a whole clean text, one
  of its lines, a quoted piece or what follows a colon; a recipient or link of no known kind
  also to one of its words.
"""

from __future__ import annotations

import re
from _thread import allocate_lock
from bisect import bisect_right
from collections import deque
from itertools import accumulate
from operator import itemgetter
from sensevm.guard.outbound import is_credential_name

# ----------------------------------------------------------------------------- roles

ROLE_BY_NAME = {
    **{n: "recipient" for n in ("to", "cc", "bcc", "recipient", "recipients", "email", "emails",
                                "phone", "attendees", "attendee", "recipient_email",
                                "email_address", "phone_number", "iban", "account",
                                "account_number")},
    **{n: "amount" for n in ("amount", "price", "total", "fee", "cents")},
    **{n: "link" for n in ("url", "link", "links")},
    **{n: "code" for n in ("code", "command", "script", "cmd")},
}
ROLES = ("recipient", "amount", "link", "code", "content", "credential")


def named_role(param: str, declared: str | None = None) -> str | None:
    """The role a declaration or a parameter's name gives, or None (then the value decides)."""
    if declared is not None:
        return declared
    name = param.lower()
    role = ROLE_BY_NAME.get(name)
    if role is not None:
        return role
    return "credential" if is_credential_name(name) else None


def role_of(param: str, declared: str | None = None, capability: str | None = None,
            value=None) -> str:
    """A parameter's role: the declared one; else by its name; else numbers paid out by a
    ``payment.*``/``pay.*`` action are amounts and Strings run by ``shell.*`` are code; else
    content."""
    role = named_role(param, declared)
    if role is not None:
        return role
    return value_role(capability, value)


def value_role(capability: str | None, value) -> str:
    if capability is not None:
        t = type(value)
        if (t is int or t is float) and capability.startswith(("payment.", "pay.")):
            return "amount"
        if t is str and capability.startswith("shell."):
            return "code"
    return "content"


# ----------------------------------------------------------------------------- hosts

def _host(host: str) -> str | None:
    """A host name as compared: lower-cased, each non-ASCII label in NFC as its punycode
    (``bücher`` is ``xn--bcher-kva``); None if it is not one.

    Not Python's "idna" codec: it is IDNA 2003, whose mappings make distinct IDNA 2008 domains
    one (``straße`` -> ``strasse``) and drop characters (a zero-width joiner, a soft hyphen),
    so a look-alike host would compare equal. Here a character that is not a letter, a digit,
    a mark or '-' makes the name unreadable, and a value with it is only its own text."""
    if not host or host.startswith(".") or ".." in host or len(host) > 253:
        return None
    labels = []
    for label in (host[:-1] if host.endswith(".") else host).split("."):
        if not label or label[0] == "-" or label[-1] == "-":
            return None
        if label.isascii():
            if not all(c.isalnum() or c == "-" for c in label):
                return None
            label = label.lower()
        else:
            import unicodedata      # only for a non-ASCII name
            label = unicodedata.normalize("NFC", label).lower()
            if not all(c.isalnum() or c == "-" or unicodedata.category(c)[0] == "M"
                       for c in label):
                return None
            try:
                label = "xn--" + label.encode("punycode").decode("ascii")
            except UnicodeError:
                return None
        if len(label) > 63:
            return None
        labels.append(label)
    return ".".join(labels) + ("." if host.endswith(".") else "")


def _ip(text: str) -> str | None:
    import ipaddress        # only for a domain literal or an IP host
    try:
        return ipaddress.ip_address(text).compressed
    except ValueError:
        return None


# ----------------------------------------------------------------------------- email

# A part found in text: (kind, key, start, end). ``key`` is what equality is tested on
# (its first item the kind's family); ``kind`` is what the audit record calls it.

_ATEXT = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                   "!#$%&'*+-/=?^_`{|}~")
# What ends a local part going left, and a domain going right (anything else glues on).
_LOCAL_STOP = frozenset(" \t\r\n\f\v<>()[]{},;:\"\\")
_DOMAIN_STOP = frozenset(" \t\r\n\f\v<>()[]{},;:\"'`\\")
_QUOTED_AT = re.compile(r'"((?:[^"\\\r\n]|\\.)*)"@')
_PROSE_TAIL = ".!?*"           # sentence punctuation (or emphasis) after an address in prose
_LOCAL_PROSE_HEAD = "'`*"       # ... and the quotes or emphasis before one
_URL_PROSE_TAIL = ".,;:!?)]}"   # ... and what may follow a link in prose


def _local(text: str) -> str | None:
    """A dot-atom local part (ASCII atext, or any non-ASCII letter or digit), lower-cased."""
    if not text or text[0] == "." or text[-1] == "." or ".." in text:
        return None
    for c in text:
        if c != "." and c not in _ATEXT and not (ord(c) > 127 and c.isalnum()):
            return None
    return text.lower()


def _email_key(local: str | None, quoted: bool, domain: str):
    """The key of local@domain, or None when the address is malformed."""
    if local is None:
        return None
    if quoted:
        plain = _local(local)
        local = plain if plain is not None else '"' + local.replace("\\", "\\\\") \
            .replace('"', '\\"').lower() + '"'
    if domain.startswith("[") and domain.endswith("]"):
        inner = domain[1:-1]
        ip = _ip(inner[5:] if inner.lower().startswith("ipv6:") else inner)
        return None if ip is None else ("email", f"{local}@[{ip}]")
    host = _host(domain)
    if host is None or host.endswith(".") or host.rsplit(".", 1)[-1].isdigit():
        return None
    return ("email", f"{local}@{host}")


def _emails(text: str, prose: bool, taken: list) -> list:
    """Every address (or malformed address) in ``text``; their spans are appended to ``taken``."""
    parts = []
    if "@" not in text:
        return parts        # (every address has one: a page of prose most often has none)
    # Quoted local parts first: the '@' inside "alice@example.com"@evil.example is not one.
    # (What is taken is looked up through an index of the links' spans, and of the quoted
    # addresses' by the furthest end so far, as each starts after the last: scanning every
    # span for every '@' was quadratic in a page of addresses.)
    links = _span_index(taken)
    quoted_end = 0
    for m in _QUOTED_AT.finditer(text):
        start = m.start()
        if start < quoted_end or _in_spans(links, start):
            continue
        end = _domain_end(text, m.end(), prose)
        domain = text[m.end():end]
        glued = start > 0 and text[start - 1] not in _LOCAL_STOP
        key = None if glued or not domain else \
            _email_key(re.sub(r"\\(.)", r"\1", m.group(1)), True, domain)
        parts.append(_address_part(key, text, start, end))
        taken.append((start, end))
        quoted_end = max(quoted_end, end)
    # (An address found below ends before the next '@' looked at, so only the links' and the
    # quoted addresses' spans can hold one.)
    held = _span_index(taken)
    at = text.find("@")
    while at >= 0:
        if _in_spans(held, at):
            at = text.find("@", at + 1)
            continue
        start = at
        while start > 0 and text[start - 1] not in _LOCAL_STOP:
            start -= 1
        if prose:       # 'alice@example.com' or *alice@example.com* in a sentence
            while start < at and text[start] in _LOCAL_PROSE_HEAD:
                start += 1
        end = _domain_end(text, at + 1, prose)
        local, domain = text[start:at], text[at + 1:end]
        before = text[start - 1] if start > 0 else ""
        if not domain or not local and before not in (")", '"'):
            # "@alice", "meet @ noon", "alice@": no address. A comment or a stray quote in
            # front of the '@' is one, though: an old mail system may read bob(x)@evil.example.
            at = text.find("@", at + 1)
            continue
        key = None if "@" in local or "@" in domain else _email_key(_local(local), False, domain)
        parts.append(_address_part(key, text, start, end))
        taken.append((start, end))
        at = text.find("@", end)
    return parts


def _domain_end(text: str, i: int, prose: bool) -> int:
    n = len(text)
    if i < n and text[i] == "[":
        close = text.find("]", i)
        if close > 0:
            return close + 1
    j = i
    while j < n and text[j] not in _DOMAIN_STOP:
        j += 1
    if prose:
        while j > i and text[j - 1] in _PROSE_TAIL:
            j -= 1
    return j


def _address_part(key, text, start, end):
    if key is None:
        return ("malformed email", ("email?", text[start:end].lower()), start, end)
    return ("email", key, start, end)


def _span_index(spans: list) -> tuple[list, list]:
    """(starts, reach) of ``spans`` in order of their starts; reach[k]: the furthest end of the
    first k + 1."""
    ordered = sorted(spans)
    return [a for a, _ in ordered], list(accumulate([b for _, b in ordered], max))


def _in_spans(index: tuple, i: int) -> bool:
    """Is ``i`` inside a span of ``index`` (_span_index)?"""
    starts, reach = index
    k = bisect_right(starts, i) - 1
    return k >= 0 and reach[k] > i


def find_emails(text: str) -> list[str]:
    """Every well-formed address in ``text``, as compared (lower-cased, punycode domain)."""
    return [p[1][1] for p in _emails(text, True, []) if p[0] == "email"]


def email_in(address: str, text: str) -> bool:
    """Does ``text`` hold ``address`` as a whole, equal address?"""
    wanted = [p[1] for p in _emails(address.strip(), False, [])]
    return len(wanted) == 1 and wanted[0][0] == "email" \
        and wanted[0] in {p[1] for p in _emails(text, True, [])}


# ----------------------------------------------------------------------------- URLs

_URL = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s<>\"'`]+")
_DEFAULT_PORTS = {"http": "80", "https": "443", "ftp": "21", "ws": "80", "wss": "443"}


def url_key(url: str):
    """The key of a URL, or None if it has no readable authority."""
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)(.*)$", url, re.S)
    if not m:
        return None
    scheme, authority, rest = m.group(1).lower(), m.group(2), m.group(3)
    user, at, hostport = authority.rpartition("@")
    port = ""
    if hostport.startswith("["):
        close = hostport.find("]")
        if close < 0:
            return None
        ip = _ip(hostport[1:close])
        if ip is None:
            return None
        host, after = f"[{ip}]", hostport[close + 1:]
        if after:
            if not after.startswith(":"):
                return None
            port = after[1:]
    else:
        name, colon, port = hostport.partition(":")
        host = _ip(name) if name.replace(".", "").isdigit() else _host(name)
        if host is None:
            return None
    if port and not port.isdigit() or port == _DEFAULT_PORTS.get(scheme):
        port = ""
    if not rest and scheme in ("http", "https"):
        rest = "/"
    return ("url", f"{scheme}://{user}{at}{host}{':' + port if port else ''}{rest}")


def _urls(text: str, prose: bool, taken: list) -> list:
    parts = []
    if "://" not in text:
        return parts        # (_URL's one literal: faster looked for alone than by the pattern)
    for m in _URL.finditer(text):
        start, end = m.start(), m.end()
        while prose and end > start and text[end - 1] in _URL_PROSE_TAIL:
            close = text[end - 1]
            if close in ")]}":          # (see https://x.example/a_(b)) keeps its own ')'
                opener = "([{"[")]}".index(close)]
                if text.count(opener, start, end) >= text.count(close, start, end):
                    break
            end -= 1
        key = url_key(text[start:end])
        parts.append(("url", key, start, end) if key is not None
                     else ("malformed url", ("url?", text[start:end]), start, end))
        taken.append((start, end))
    return parts


def normal_url(url: str) -> str:
    key = url_key(url.strip())
    return key[1] if key is not None else url.strip()


def find_urls(text: str) -> list[str]:
    return [p[1][1] for p in _urls(text, True, []) if p[0] == "url"]


def url_in(url: str, text: str) -> bool:
    key = url_key(url.strip())
    return key is not None and key in {p[1] for p in _urls(text, True, [])}


# ----------------------------------------------------------------------------- numbers

_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
    "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
    "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22,
    "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32,
    "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
    "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31,
    "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28, "TL": 23,
    "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}
_IBAN = re.compile(r"[A-Za-z]{2}\d{2}[A-Za-z0-9]{11,30}")
_IBAN_HEAD = re.compile(r"[A-Z]{2}\d{2}")
_IBAN_GROUP = re.compile(r"[A-Z0-9]{1,4}")


def iban_valid(iban: str) -> bool:
    """ISO 13616: a registered country, its length, and the mod-97 check digits."""
    iban = iban.replace(" ", "").upper()
    if _IBAN_LENGTHS.get(iban[:2]) != len(iban) or not iban.isalnum() or not iban.isascii():
        return False
    moved = iban[4:] + iban[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _iban_part(text: str, start: int, end: int):
    iban = text[start:end].replace(" ", "").upper()
    kind = "iban" if iban_valid(iban) else "iban (unverified)"
    return (kind, ("iban", iban), start, end)


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = ord(c) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _digits_part(group: str, start: int, end: int, words: int):
    """A phone, card or account number from a group of digit words, or None."""
    digits = "".join(c for c in group if c.isdigit())
    international = group.startswith("+")
    if not international and group.startswith("00") and len(digits) >= 9:
        international, digits = True, digits[2:]
    if len(digits) < 7:
        return None
    if international:
        return ("phone", ("phone", "+" + digits), start, end)
    if 13 <= len(digits) <= 19 and luhn_valid(digits):
        kind = "card number"
    elif len(digits) <= 15 and (words > 1 or any(c in group for c in "()-.")):
        kind = "phone number (no country code)"
    else:
        kind = "account number"
    return (kind, ("number", digits), start, end)


# ----------------------------------------------------------------------------- amounts

_SYMBOLS = {"$": "USD", "€": "EUR", "£": "GBP", "₹": "INR", "¥": "JPY"}
_WORDS = {"usd": "USD", "dollar": "USD", "dollars": "USD", "eur": "EUR", "euro": "EUR",
          "euros": "EUR", "gbp": "GBP", "pound": "GBP", "pounds": "GBP", "inr": "INR",
          "rupee": "INR", "rupees": "INR", "rs": "INR", "rs.": "INR", "jpy": "JPY",
          "yen": "JPY", "chf": "CHF", "francs": "CHF", "cad": "CAD", "aud": "AUD",
          "cny": "CNY", "sek": "SEK", "nok": "NOK", "dkk": "DKK", "pln": "PLN", "czk": "CZK",
          "mxn": "MXN", "brl": "BRL", "zar": "ZAR", "sgd": "SGD", "hkd": "HKD", "nzd": "NZD"}
_NUMBER = (r"[+-]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d{1,2}(?:,\d{2})+,\d{3}(?:\.\d+)?"
           r"|\d+(?:\.\d+)?)")
# An amount's patterns and the decimal module take a few milliseconds to make and import, a
# tenth of a run's start-up, and most runs read no amount (a page's text sent on has none to
# read): made at the first amount read, by _amount_reading.
_AMOUNT_WORD_PATTERN = r"(?P<pre>[$€£₹¥])?(?P<num>" + _NUMBER + r")(?P<post>[$€£₹¥])?"
_AMOUNT_VALUE_PATTERN = (
    r"(?:(?P<pre>[$€£₹¥])\s?|(?P<code>[A-Za-z]{2,3}\.?)\s)?(?P<num>" + _NUMBER + r")"
    r"(?:\s?(?P<post>[$€£₹¥])|\s(?P<word>[A-Za-z]+\.?))?")
_amounts_read = None


def _amount_reading() -> tuple:
    """(Decimal, InvalidOperation, the pattern of an amount word, the pattern of an amount
    argument), made once, at the first amount read. (Two threads may both make them: equal
    patterns, one module.)"""
    global _amounts_read
    if _amounts_read is None:
        from decimal import Decimal, InvalidOperation
        _amounts_read = (Decimal, InvalidOperation, re.compile(_AMOUNT_WORD_PATTERN),
                         re.compile(_AMOUNT_VALUE_PATTERN))
    return _amounts_read


_MONTHS = frozenset(
    "jan feb mar apr may jun jul aug sep sept oct nov dec january february march april june "
    "july august september october november december".split())
_PHONEISH = re.compile(r"\+?[\d().\-]*\d[\d().\-]*")
_DATE = re.compile(r"\d{4}-\d{1,2}(?:-\d{1,2}(?:T[\d:.]+Z?)?)?|\d{1,4}[/.-]\d{1,2}[/.-]\d{1,4}")
_LEAD = "([{\"'`*"
_TRAIL = ")]}\"'`*.,;:!?"


def _decimal(text: str) -> Decimal | None:
    decimal, invalid = (_amounts_read or _amount_reading())[:2]
    try:
        return decimal(text.replace(",", ""))
    except invalid:
        return None


_WORD = re.compile(r"\S+")
_AFTER_ALL = (float("inf"),)     # (greater than any word's (start, ...): for bisect)


def _words(text: str) -> list:
    """(start, end, core start, core end) of every whitespace-separated word: the core
    without the quotes, brackets and sentence punctuation prose puts around it."""
    out = []
    for m in _WORD.finditer(text):
        s, e = m.span()
        cs, ce = s, e
        while cs < ce and text[cs] in _LEAD:
            cs += 1
        while ce > cs and text[ce - 1] in _TRAIL:
            ce -= 1
        out.append((s, e, cs, ce))
    return out


def _numbers(text: str, amounts_too: bool = True) -> tuple[list, list]:
    """IBANs, phone, card and account numbers, and amounts, in ``text``: those _numbers_among
    finds in all its words, read from the words around its digits only.

    A number or an amount starts at a word holding a digit (_numbers_among), and what decides
    it is at most two words either side of that word (a month, a day, a currency) and the
    words a number runs on into (_number_at). So the text is read in windows: each digit's
    word with two words after it, and two before when amounts are read too (_window), windows
    that overlap made one. A window is a text of its own to _numbers_among, unless a number
    runs on to its last word with more words after it (it might run on further): then the
    whole text is read, as is a text dense with digits. Prose has few digits, and its words
    were most of the cost of reading a page; when only numbers are read, a text whose digits
    cannot make one (_may_hold_number) has no window read at all."""
    if text.isascii():
        # (Its digits are 0-9: found in a copy with each character one byte of what it is to
        # a number, by bytes.find, faster than the pattern's walk over every character.)
        marks = text.encode("ascii").translate(_MARKS)
        at = marks.find(b"0")
    else:
        marks = None
        first = _DIGITS.search(text)
        at = first.start() if first is not None else -1
    if at < 0:
        return [], []
    if not amounts_too and not _may_hold_number(text, marks):
        return [], []
    # A text dense with digits (a table, a log) is read whole: its windows would cover it
    # anyway, and finding each costs about what reading _DENSE of its characters does.
    limit = len(text) // _DENSE
    if marks is not None and marks.count(b"0") > limit \
            and marks.count(b" 0") + marks.count(b"a0") + marks.count(b"#0") + (at == 0) > limit:
        return _numbers_among(text, _words(text), True, amounts_too, True)
    windows = []
    visited = 0
    while at >= 0:
        visited += 1
        if visited > limit:
            return _numbers_among(text, _words(text), True, amounts_too, True)
        lo, hi, word_end = _window(text, at, 2 if amounts_too else 0)
        if windows and lo <= windows[-1][1]:
            windows[-1] = (windows[-1][0], max(hi, windows[-1][1]))
        else:
            windows.append((lo, hi))
        # (The next word holding a digit.)
        if marks is not None:
            at = marks.find(b"0", word_end)
        else:
            more = _DIGITS.search(text, word_end)
            at = more.start() if more is not None else -1
    parts: list = []
    amounts: list = []
    for lo, hi in windows:
        window = text[lo:hi]
        last = _WORD.search(text, hi) is None       # (no word after it: the text's own end)
        found = _numbers_among(window, _words(window), last, amounts_too)
        if found is None:
            return _numbers_among(text, _words(text), True, amounts_too)
        window_parts, window_amounts = found
        for kind, key, start, end in window_parts:      # (no comprehension: see value_parts)
            parts.append((kind, key, start + lo, end + lo))
        amounts += window_amounts
    return parts, amounts


def _window(text: str, at: int, before: int = 2) -> tuple[int, int, int]:
    """The start of the word ``before`` (2 or 0) words before the word holding position
    ``at``, the end of the second word after it (or the text's first word's start, its last
    word's end), and the end of the word itself. (Amounts look two words back, for a month,
    a day or a currency; numbers only forward.)

    Read by patterns, forward from ``at`` and forward through the reversed text before it:
    _BACK_CHARS of it, twice as much each time that does not reach the words' start."""
    word_end = _WORD_REST.match(text, at).end()
    hi = _TWO_AFTER.match(text, word_end).end()
    if not before and (at == 0 or text[at - 1].isspace()):
        return at, hi, word_end             # (the digit starts its word)
    back = _TWO_BEFORE if before else _WORD_REST
    size = _BACK_CHARS
    while True:
        lo = max(0, at - size)
        reversed_before = text[lo:at][::-1]
        m = back.match(reversed_before)
        if lo == 0 or (not before or m.group(2) is not None) and m.end() < len(reversed_before):
            return at - m.end(), hi, word_end
        size *= 2


_WORD_REST = re.compile(r"\S*")
_TWO_AFTER = re.compile(r"(?:\s+\S+){0,2}")
# (Reversed: the rest of the word back to its start, then two words, each after whitespace.)
_TWO_BEFORE = re.compile(r"\S*(\s+\S+)?(\s+\S+)?")
_BACK_CHARS = 96


def _numbers_among(text: str, words: list, last: bool = True, amounts_too: bool = True,
                   dense: bool = False) -> tuple[list, list] | None:
    """IBANs, phone, card and account numbers, and (if ``amounts_too``) amounts, in the words
    of ``text``. If not ``last`` (more words follow the text), None when a number runs on to
    its last word.

    Only a word holding a digit is looked at: every pattern a number or an amount starts with
    (_IBAN, _IBAN_HEAD, _PHONEISH, _AMOUNT_WORD) needs one, so any other word starts nothing
    (the words after a number's first, an IBAN's groups of letters among them, are still read
    by _number_at)."""
    parts = []
    amounts = []
    # (``dense``: most words hold a digit, and each word is tried, as finding which do would
    # cost more than trying those that do not.)
    holding = range(len(words)) if dense else _holding_digits(text, words)
    if not holding:
        return parts, amounts
    used = [False] * len(words)
    after = 0                   # (the first word not inside a number found already)
    for i in holding:
        if i < after:
            continue
        j, part, reach = _number_at(text, words, i)
        if not last and reach >= len(words) - 1:
            return None             # (it read the last word: a number might run on past it)
        if part is None:
            continue
        parts.append(part)
        for k in range(i, j + 1):
            used[k] = True
        s, e, cs, ce = words[i]
        if j == i and amounts_too and text[cs:ce].isdigit():
            # Seven digits or more with nothing around them: an account number, or an amount.
            decimal = (_amounts_read or _amount_reading())[0]
            amounts.append((decimal(text[cs:ce]), _currency_near(text, words, i), i))
        after = j + 1
    if not amounts_too:
        return parts, amounts
    amount_word = (_amounts_read or _amount_reading())[2]
    for i in holding:
        if used[i]:
            continue
        s, e, cs, ce = words[i]
        m = amount_word.fullmatch(text, cs, ce)
        # A day or a year beside a month's name is a date (1 April 2022, April 1, 2022).
        if m is None or _month(text, words, i - 1) or _month(text, words, i + 1) \
                or _day(text, words, i - 1) and _month(text, words, i - 2) \
                or _day(text, words, i + 1) and _month(text, words, i + 2):
            continue
        value = _decimal(m.group("num"))
        if value is None:
            continue
        symbol = m.group("pre") or m.group("post")
        currency = _SYMBOLS[symbol] if symbol else _currency_near(text, words, i)
        amounts.append((value, currency, i))
    amounts.sort(key=lambda a: a[2])
    return parts, [(v, c) for v, c, _ in amounts]


_DIGITS = re.compile(r"\d+")      # (\d as the patterns above read it: any decimal digit)
_DENSE = 24
# What a character is to a number, one byte each: "0" a digit, "a" a letter (of an IBAN),
# " " what may stand between a phone or card number's digits ("+()-." and whitespace), "#"
# anything else; a byte of a non-ASCII character (_may_hold_number's copy) " ".
_MARKS = bytes(
    ord(" ") if c >= 128 else ord("0") if chr(c).isdigit() else ord("a") if chr(c).isalpha()
    else ord(" ") if chr(c).isspace() or chr(c) in "+()-." else ord("#") for c in range(256))
# (On marks: seven digits with nothing but separators between them, and two letters and two
# digits, what an IBAN starts with. The second is written to search for the rare digits first.)
_SEVEN_DIGITS = re.compile(rb"0(?: *0){6}")
_IBAN_START = re.compile(rb"00(?<=aa00)")
_NON_ASCII_DIGIT = re.compile(r"[^\x00-\x7f](?<=\d)")


def _may_hold_number(text: str, marks: bytes | None) -> bool:
    """False if no IBAN, phone, card or account number can be in ``text`` (``marks``: its
    _MARKS copy, if it is ASCII): none has two letters and two digits together, what an IBAN
    starts with, nor seven digits with nothing but "+()-." and whitespace between them, as
    every other number has (_digits_part; its words are joined by single spaces). Most prose's
    digits are a day, a count, a short figure: nothing to read the words around them for.

    A text with non-ASCII characters is looked at through its UTF-8 bytes, each byte of such
    a character a separator (a superset of the whitespace among them), unless one of them is
    a digit."""
    if marks is None:
        if _NON_ASCII_DIGIT.search(text) is not None:
            return True
        marks = text.encode("utf-8", "surrogatepass").translate(_MARKS)
    return marks.count(b"0") >= 7 and _SEVEN_DIGITS.search(marks) is not None \
        or _IBAN_START.search(marks) is not None


def _holding_digits(text: str, words: list) -> list:
    """The numbers, in order, of the words of ``text`` that hold a digit."""
    holding: list = []
    for m in _DIGITS.finditer(text):
        # (The last word starting at or before the digit: a digit is never a space.)
        k = bisect_right(words, (m.start(),) + _AFTER_ALL) - 1
        if not holding or holding[-1] != k:
            holding.append(k)
    return holding


def _number_at(text: str, words: list, i: int):
    """(last word, part, reach) of an IBAN or a phone, card or account number starting at
    word ``i``, or (i, None, reach); reach: the last word it may have read (one after where a
    number's words ran on to, which it looked at to see whether they went on)."""
    s, e, cs, ce = words[i]
    core = text[cs:ce]
    if _IBAN.fullmatch(core) and (core[:2].isupper() or iban_valid(core)):
        return i, _iban_part(text, cs, ce), i
    n = len(words)
    reach = i
    if _IBAN_HEAD.fullmatch(core) and ce == e:
        # The print form, in groups of four: GB29 NWBK 6016 1331 9268 19
        j = i
        # (At most _IBAN_GROUPS groups: after that many it is over 34 characters whatever
        # follows, and no IBAN; walking on from every head of "GB29 GB29 ..." was quadratic.)
        while j + 1 < n and j - i < _IBAN_GROUPS and _joined(words, j) \
                and words[j][3] - words[j][2] == 4:
            ns, ne, ncs, nce = words[j + 1]
            if ncs != ns or not _IBAN_GROUP.fullmatch(text, ncs, nce):
                break
            j += 1
            if nce != ne:
                break
        reach = j + 1
        if j > i and 15 <= len(text[cs:words[j][3]].replace(" ", "")) <= 34:
            return j, _iban_part(text, cs, words[j][3]), reach
    first = _digit_word(text, words[i])
    if first is None:
        return i, None, reach
    # Groups of a few digits joined by single spaces, as phone and card numbers are written
    # (+1 555 010 0000, 4111 1111 1111 1111, +91 98765 43210); a long run stands alone.
    start, end, clean = first
    j = i
    # (A run of seven digits cannot cross the one blank between two groups: the groups are
    # short together if each is, and each one added is checked. Looking again at all of them
    # at every step was quadratic in a long run of "1 1 1 ...".)
    short = None
    while clean and j + 1 < n and words[j + 1][0] == words[j][1] + 1:
        if short is None:
            short = _short_groups(text, start, end)
        if not short:
            break
        nxt = _digit_word(text, words[j + 1])
        if nxt is None or nxt[0] != words[j + 1][0] or text[nxt[0]] == "+" \
                or not _short_groups(text, nxt[0], nxt[1]):
            break
        end, clean = nxt[1], nxt[2]
        j += 1
    reach = max(reach, j + 1)
    group = text[start:end]
    if j == i and not (len(group) >= 7 or not _GROUP_MARKS.isdisjoint(group)):
        return i, None, reach
    if j == i and _looks_like_version(group):
        return i, None, reach
    part = _digits_part(group, start, end, j - i + 1)
    return (j, part, reach) if part is not None else (i, None, reach)


_LONG_RUN = re.compile(r"\d{7}")
_IBAN_GROUPS = 9
_GROUP_MARKS = frozenset("+()-.")


def _short_groups(text: str, start: int, end: int) -> bool:
    return _LONG_RUN.search(text, start, end) is None


def _joined(words: list, j: int) -> bool:
    """Word ``j`` ends clean and the next one follows after exactly one space."""
    return words[j][3] == words[j][1] and words[j + 1][0] == words[j][1] + 1


def _digit_word(text: str, word):
    """(start, end, ends clean) of the digits-and-separators part of a word, or None."""
    s, e, cs, ce = word
    if _PHONEISH.fullmatch(text, s, e) and not _DATE.fullmatch(text, cs, ce):
        return s, e, True
    if ce > cs and _PHONEISH.fullmatch(text, cs, ce) and not _DATE.fullmatch(text, cs, ce):
        return cs, ce, ce == e
    return None


def _looks_like_version(group: str) -> bool:
    pieces = group.split(".")
    return len(pieces) >= 3 and all(p.isdigit() for p in pieces) and any(len(p) < 2 for p in pieces)


def _month(text, words, i) -> bool:
    if 0 <= i < len(words):
        return text[words[i][2]:words[i][3]].lower() in _MONTHS
    return False


def _day(text, words, i) -> bool:
    if 0 <= i < len(words):
        word = text[words[i][2]:words[i][3]]
        return word.isdigit() and len(word) <= 2
    return False


def _currency_near(text, words, i):
    """The currency a word before or after a number names (USD 500, 500 rupees), or None."""
    for j in (i + 1, i - 1):
        if 0 <= j < len(words):
            s, e, cs, ce = words[j]
            word = text[cs:ce]
            if word in _SYMBOLS:
                return _SYMBOLS[word]
            currency = _WORDS.get(word.lower())
            if currency is not None:
                return currency
    return None


def find_amounts(text: str) -> list[tuple[Decimal, str | None]]:
    """Every amount in ``text`` as (value, currency or None): ``$1,200``, ``500 rupees``,
    ``12.50``, ``transfer 5000`` -- not the digits of a date, a version, an id or a number."""
    return analyse(text).amounts


def as_amount(value) -> tuple[Decimal, str | None] | None:
    """An amount argument (Int, Float, or a String such as ``"$1,200"``) as a decimal."""
    decimal, _, _, amount_value = _amounts_read or _amount_reading()
    t = type(value)
    if t is int:
        return decimal(value), None
    if t is float:
        if value != value or value in (float("inf"), float("-inf")):
            return None
        return decimal(repr(value)), None
    if t is not str:
        return None
    m = amount_value.fullmatch(value.strip())
    if m is not None:
        number = _decimal(m.group("num"))
        symbol = m.group("pre") or m.group("post")
        word = m.group("code") or m.group("word")
        if symbol:
            currency = _SYMBOLS[symbol]
        elif word:
            currency = _WORDS.get(word.lower())
            if currency is None:
                number = None
        else:
            currency = None
        if number is not None:
            return number, currency
    found = analyse(value).amounts
    return found[0] if len(found) == 1 else None


def _same_amount(a, b) -> bool:
    return a[0] == b[0] and (a[1] is None or b[1] is None or a[1] == b[1])


def amount_in(value, text: str) -> bool:
    amount = as_amount(value)
    return amount is not None and any(_same_amount(amount, given)
                                      for given in analyse(text).amounts)


# ----------------------------------------------------------------------------- phones

def find_phones(text: str) -> list[str]:
    """Every phone number in ``text``: ``+`` and its digits (E.164), or the digits of one
    written without a country code."""
    return [p[1][1] for p in analyse(text).parts if p[1][0] in ("phone", "number")]


def phone_in(number: str, text: str) -> bool:
    wanted = [p[1] for p in analyse(number, False).parts]
    return len(wanted) == 1 and wanted[0][0] in ("phone", "number") \
        and wanted[0] in analyse(text).keys


# ----------------------------------------------------------------------------- text

_QUOTED = re.compile(r"```(?:[\w+-]*\n)?(.*?)```|`([^`\n]+)`|\"([^\"\n]+)\""
                     r"|(?<![\w'])'([^'\n]+)'(?![\w'])", re.S)


def _pieces(text: str) -> tuple[frozenset, frozenset]:
    """The pieces of a clean text that vouch for a value of no kind (a code, a credential):
    the whole text, its lines, quoted pieces and what follows a colon; and its words, which
    vouch only for recipients and links."""
    whole = set()
    stripped = text.strip()
    if stripped:
        whole.add(stripped)
    for line in text.splitlines():
        line = line.strip()
        if line:
            whole.add(line)
            head, colon, tail = line.partition(": ")
            if colon and tail.strip():
                whole.add(tail.strip())
    for m in _QUOTED.finditer(text):
        piece = next(g for g in m.groups() if g is not None).strip()
        if piece:
            whole.add(piece)
    words = set()
    for s, e, cs, ce in _words(text):
        words.add(text[s:e])
        if ce > cs:
            words.add(text[cs:ce])
    return frozenset(whole), frozenset(words)


# ----------------------------------------------------------------------------- analysis

class Analysis:
    """What one text holds: its parts (kinds and keys, with spans), their keys, its amounts
    and its pieces of text.

    The amounts are read when first asked for (``amounts`` None: from ``text`` with the spans
    ``taken`` by links and addresses masked): only the user's words, the program's and an
    amount argument are asked for theirs, and most texts read (a page sent on, a trusted
    record) are none of these."""

    __slots__ = ("parts", "keys", "_amounts", "_pieces", "_text", "_taken")

    def __init__(self, parts, amounts, text=None, taken=()):
        self.parts = parts
        self.keys = frozenset([p[1] for p in parts]) if parts else _NO_KEYS
        self._amounts = amounts
        self._pieces = None
        self._text = text
        self._taken = taken

    @property
    def amounts(self) -> list:
        amounts = self._amounts
        if amounts is None:
            # (Two threads may both read them: the same list, made twice.)
            amounts = self._amounts = _numbers(_masked(self._text, self._taken), True)[1]
        return amounts

    def pieces(self, text) -> tuple[frozenset, frozenset]:
        if self._pieces is None:
            self._pieces = _pieces(text)
        return self._pieces


_NO_KEYS: frozenset = frozenset()


# Analyses by (text, prose): the same evidence and arguments are read at verify, at commit and
# by every later check. Bounded by count and by the characters it keeps alive (pages are big).
_CACHE: dict = {}
# Its keys, oldest first: the next to go when it is full. (A dict's first key is found by
# walking past every slot emptied before it, up to the next resize: evicting through
# next(iter(_CACHE)) cost each new text read about 9,000 instructions once the cache is full.)
_CACHE_ORDER: deque = deque()
_CACHE_ENTRIES = 2048
_CACHE_CHARS = 4_000_000
_cached_chars = 0
_KEEP_EMPTY = 512
_CACHE_LOCK = allocate_lock()


def sent_parts(text: str) -> list:
    """``analyse(text).parts``, for a text an outgoing call sends (its parts are all that is
    asked of it; a labelled String is read as its text). A text of fewer than _KEEP_EMPTY
    characters without an '@', a '://' or digits that could make a number (_may_hold_number)
    has none, decided without the cache: keeping such a reading cost about what making it
    again does, and each new one (a page's text, new every turn) pushed a reading worth
    keeping out."""
    # ('/' first: most prose has none, and it is found faster than '://' is.)
    if len(text) < _KEEP_EMPTY and "@" not in text and ("/" not in text or "://" not in text):
        if text.isascii():
            # (_may_hold_number's test of ASCII text, written out: one call less for each
            # text an agent sends.)
            marks = text.encode("ascii").translate(_MARKS)
            if (marks.count(b"0") < 7 or _SEVEN_DIGITS.search(marks) is None) \
                    and _IBAN_START.search(marks) is None:
                return []
        elif _DIGITS.search(text) is None or not _may_hold_number(text, None):
            return []
    # (A labelled String is read as its plain text, which the cache keeps.)
    return analyse(text if type(text) is str else str.__str__(text)).parts


def analyse(text: str, prose: bool = True) -> Analysis:
    """Every address, number, link and amount in ``text``. ``prose``: the text is sentences
    (an address at the end of one may be followed by a full stop); an argument is not."""
    global _cached_chars
    last = _last_address
    if last[0] == text and not (prose and text[0] in _LOCAL_PROSE_HEAD):
        return last[1]              # (the plain address read last: _one_address)
    key = (text, prose)
    found = _CACHE.get(key)
    if found is None:
        # One plain address is read faster than it is cached, and is not: a tool hands a new
        # one to every call, and each would push an expensive reading (a page's) out.
        if "@" in text:
            found = _one_address(text, prose)
            if found is not None:
                return found
        # An argument read as such is often read as prose next (a tool's address, evidence
        # and argument at once): the same analysis, when reading it as prose would strip
        # nothing from any part.
        plain = _CACHE.get((text, False)) if prose else None
        found = plain if plain is not None and _prose_strips_nothing(text, plain) else \
            _analyse_text(text, prose)
        if len(text) <= _CACHE_CHARS // 8:
            with _CACHE_LOCK:       # async tools and agents check from threads of their own
                if key not in _CACHE:
                    while _CACHE_ORDER and (len(_CACHE) >= _CACHE_ENTRIES
                                            or _cached_chars + len(text) > _CACHE_CHARS):
                        old = _CACHE_ORDER.popleft()
                        del _CACHE[old]
                        _cached_chars -= len(old[0])
                    _CACHE[key] = found
                    _CACHE_ORDER.append(key)
                    _cached_chars += len(text)
    return found


def _prose_strips_nothing(text: str, plain: Analysis) -> bool:
    """Would reading ``text`` as prose find exactly ``plain`` (its reading as an argument)?

    Prose differs from an argument in three places only, each stripping characters from a
    part found in the same place: a link's trailing punctuation (_urls), the quotes or
    emphasis before an address's local part and the sentence punctuation after its domain
    (_emails, _domain_end). When no part of ``plain`` starts or ends with what those would
    strip, each of them strips nothing, so every step of the two readings is the same and so
    is what they find (the masked rest the numbers are read from included)."""
    for kind, _, start, end in plain.parts:
        if kind in ("url", "malformed url"):
            if text[end - 1] in _URL_PROSE_TAIL:
                return False
        elif kind in ("email", "malformed email"):
            if text[start] in _LOCAL_PROSE_HEAD or text[end - 1] in _PROSE_TAIL:
                return False
    return True


# A text that is one plain address and nothing else, as tools hand them over: a dot-atom local
# part of ASCII atext and a host of ASCII labels (letters, digits, '-' inside), each at most 63.
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`|~-]+"        # (atext but '{' and '}', which stop a local part)
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
# (A host's labels; none of them the last and all digits, which is not a host name.)
_HOST_LABEL = f"(?![0-9]+\\Z){_LABEL}"
_ONE_ADDRESS = re.compile(f"{_ATOM}(?:\\.{_ATOM})*@({_HOST_LABEL}(?:\\.{_HOST_LABEL})*)")


def _one_address(text: str, prose: bool) -> Analysis | None:
    """The analysis of ``text`` when it is one plain address, read without the general scan;
    else None.

    What _analyse_text finds then, step by step: no link (no ':'), no quoted local part (no
    '"'); the one '@', its local part running back to the start (atext holds nothing that stops
    it) and its domain to the end; a well-formed dot-atom and host (the pattern's own rules),
    so its key; and nothing left to read numbers from. Except: a host of over 253 characters
    or with an all-digit last label, and in prose a first character prose strips (a quote or
    emphasis); those are left to the scan.

    The last one read is kept, and analyse looks at it first: a tool's address is read as an
    argument and then, as the evidence it also is, as prose, which reads it the same (its
    first character aside)."""
    global _last_address
    m = _ONE_ADDRESS.fullmatch(text)
    if m is None or prose and text[0] in _LOCAL_PROSE_HEAD:
        return None
    if len(text) > 255 and len(text) - m.start(1) > 253:
        return None                 # (a host of over 253 characters)
    # (The local part and the host lower-cased, with '@' between: the whole text is them, and
    # ASCII, so its lower-casing is.)
    key = ("email", text.lower())
    found = _new_analysis(Analysis)         # (Analysis(parts, []), its fields written out)
    found.parts = [("email", key, 0, len(text))]
    found.keys = frozenset((key,))
    found._amounts = []
    found._pieces = None
    found._text = None
    found._taken = ()
    _last_address = (text, found)
    return found


_new_analysis = object.__new__
_last_address = (None, None)        # (None: equal to no text, the empty one included)


def _analyse_text(text: str, prose: bool) -> Analysis:
    taken: list = []
    parts = _urls(text, prose, taken)
    parts += _emails(text, prose, taken)
    parts += _numbers(_masked(text, taken), False)[0]
    if len(parts) > 1:
        parts.sort(key=_start)
    return Analysis(parts, None, text, taken)


_start = itemgetter(2)      # (a part's start)


def _masked(text: str, taken) -> str:
    """``text`` with the spans ``taken`` (links and addresses) made spaces: what numbers and
    amounts are read from."""
    if not taken:
        return text
    masked = list(text)
    for a, b in taken:
        masked[a:b] = " " * (b - a)
    return "".join(masked)


RECIPIENT_KINDS = ("email", "email?", "phone", "number", "iban", "url", "url?")


def value_parts(role: str, value) -> list:
    """The values an argument in ``role`` holds, each to be vouched for: (kind, key, shown).

    A recipient holds every address and number in it (``"a@x.example, b@y.example"`` holds
    two); a link, its URLs; an amount, one amount (key None when it does not read as one);
    anything else, or a recipient or link with none, is compared as text."""
    if role == "amount":
        amount = as_amount(value)
        shown = str(value)
        return [("amount", None if amount is None else ("amount",) + amount, shown)]
    text = value if type(value) is str else str(value)
    if role in ("recipient", "link"):
        found = analyse(text, False).parts
        wanted = RECIPIENT_KINDS if role == "recipient" else ("url", "url?")
        if len(found) == 1:         # (one address, as a tool hands it: no comprehension)
            k, key, s, e = found[0]
            if key[0] in wanted:
                return [(k, key, text[s:e])]      # (the text itself, when it is all of it)
        else:
            # (A loop, not a comprehension: its names would be cells made at every call.)
            parts = []
            for k, key, s, e in found:
                if key[0] in wanted:
                    parts.append((k, key, text[s:e]))
            if parts:
                return parts
    return [("text", None, text)]


def text_match(role: str, value: str, text: str) -> bool:
    """Is ``value`` a whole piece of ``text`` -- the text, a line, a quoted piece, what follows
    a colon, or (for a recipient or a link of no known kind) a word? A code or a credential
    is never vouched for by a word: a page must not set the password to one of yours."""
    whole, words = analyse(text).pieces(text)
    value = value.strip()
    if not value:
        return False
    return value in whole or (role not in ("code", "credential") and value in words)


def matches(role: str, part, text: str) -> bool:
    """Does the clean ``text`` hold a value equal to ``part`` (from value_parts)?"""
    kind, key, shown = part
    if kind == "amount":
        if key is None:
            return False
        wanted = key[1:]
        return any(_same_amount(wanted, given) for given in analyse(text).amounts)
    if key is None:
        return text_match(role, shown, text)
    return key in analyse(text).keys


def endorsed_by(role: str, value, clean: list) -> tuple | None:
    """The first clean span (origin, text) that vouches for ``value`` in ``role``, or None.

    ``clean`` lists (origin, text) pairs in order of precedence (user, literal, trusted). A
    value holding several recipients is endorsed only when each of them is."""
    found = None
    for part in value_parts(role, value):
        span = next((s for s in clean if matches(role, part, s[1])), None)
        if span is None:
            return None
        found = found or span
    return found


def recipients_in(text: str) -> list[str]:
    """The addresses and numbers inside any string argument of an outgoing action."""
    return [p[1][1] for p in analyse(text).parts if p[1][0] in RECIPIENT_KINDS]
