"""Which declarations send data out: outbound capabilities and credential parameter names."""

from __future__ import annotations

# Capabilities that send data out of the program, or hand over who may act as the user
# (account.*, auth.*), as prefixes ("email." covers email.send). (Not in endorse.py:
# telling whether an action is outgoing must not cost the import of the matching rules, which
# a program that sends nothing never needs.)
OUTBOUND = ("email.", "mail.", "sms.", "payment.", "pay.", "calendar.invite", "http.post",
            "net.post", "shell.exec", "account.", "auth.")

# Parameter names (or "_"-separated parts of them) that hold a credential.
_CREDENTIAL_WORDS = frozenset(("password", "passwd", "passphrase", "passcode", "pin", "secret",
                               "token", "credential", "credentials", "apikey", "otp"))


def is_credential_name(name: str) -> bool:
    """``password``, ``new_password``, ``api_key``, ``auth_token``...: a credential's name."""
    name = name.lower()
    if name == "key" or name.endswith("_key"):
        return True
    return any(part in _CREDENTIAL_WORDS for part in name.split("_"))


_OUTBOUND_CACHE: dict = {}


def is_outbound(capability, sends: bool = False, params=()) -> bool:
    """Does a declaration send data out: ``sends``, an outbound capability, or a credential
    among its parameters (a password chosen by a page is as bad as a recipient)?"""
    if sends:
        return True
    key = (capability, tuple(params))
    known = _OUTBOUND_CACHE.get(key)
    if known is None:
        known = (capability is not None
                 and any(capability == p or (p.endswith(".") and capability.startswith(p))
                         for p in OUTBOUND)) \
            or any(is_credential_name(p) for p in params)
        if len(_OUTBOUND_CACHE) < 4096:
            _OUTBOUND_CACHE[key] = known
    return known
