"""The console scripts' guard: no Python traceback reaches the user."""

from __future__ import annotations

import pytest

from sensevm.base.diagnostics import guarded


def _raise(exc):
    def main():
        raise exc
    return main


def test_an_exception_is_an_internal_error_exit_70(capsys, monkeypatch):
    monkeypatch.delenv("SENSE_DEBUG", raising=False)
    with pytest.raises(SystemExit) as info:
        guarded("sensec", _raise(ValueError("boom")))
    assert info.value.code == 70
    assert capsys.readouterr().err == ("sensec: internal error: ValueError: boom\n"
                                       "(this is a bug in sensec; set SENSE_DEBUG=1 to see where)\n")


def test_ctrl_c_exits_130(capsys):
    with pytest.raises(SystemExit) as info:
        guarded("sensevm", _raise(KeyboardInterrupt()))
    assert info.value.code == 130 and capsys.readouterr().err == "interrupted\n"


def test_an_exit_passes_through_and_a_normal_return_returns(capsys):
    with pytest.raises(SystemExit) as info:
        guarded("sensevm", _raise(SystemExit(3)))
    assert info.value.code == 3
    assert guarded("sensevm", lambda: None) is None
    assert capsys.readouterr().err == ""


def test_sense_debug_shows_the_real_exception(monkeypatch):
    monkeypatch.setenv("SENSE_DEBUG", "1")
    with pytest.raises(ValueError, match="boom"):
        guarded("sensec", _raise(ValueError("boom")))
