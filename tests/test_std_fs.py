"""std.fs through the real commands on both tiers, against real files (docs/stdlib.md)."""

from __future__ import annotations

import os

import pytest

from stdlib_helpers import TIERS, clean_failure, sense_run

tiers = pytest.mark.parametrize("tier", TIERS)
IMPORT = "from std.fs import read_text, list_dir, exists, write_text, append_text, make_dir, remove\n"


def commit(call: str, name: str = "a") -> str:
    return f"{name} = {call}\n{name}.verify()\n{name}.commit()\n"


@tiers
def test_tools_read_list_and_test(tmp_path, tier):
    (tmp_path / "b.txt").write_text("héllo\nworld")
    (tmp_path / "d").mkdir()
    for name in ("z", "a", "m"):
        (tmp_path / "d" / name).write_text("")
    done = sense_run(tmp_path, IMPORT + 'print(read_text("b.txt"))\nprint(list_dir("d"))\n'
                                        'print(exists("b.txt"), exists("nope"))\n', tier=tier)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "héllo\nworld\n[a, m, z]\ntrue false\n"


@tiers
@pytest.mark.parametrize("setup,call,reason", [
    (None, 'read_text("missing.txt")', "no such file"),
    ("dir", 'read_text("thing")', "is a directory"),
    ("latin", 'read_text("thing")', "not UTF-8"),
    (None, 'list_dir("missing")', "no such file"),
    (None, 'remove("missing.txt")', "no such file"),
    (None, 'write_text("no/such/dir/x.txt", "t")', "no such file"),
])
def test_failures_are_positioned_errors_naming_the_path(tmp_path, tier, setup, call, reason):
    if setup == "dir":
        (tmp_path / "thing").mkdir()
    elif setup == "latin":
        (tmp_path / "thing").write_bytes(b"caf\xe9")
    body = f"x = {call}\n" if call.startswith(("read", "list")) else commit(call)
    done = sense_run(tmp_path, IMPORT + 'print("start")\n' + body, tier=tier)
    clean_failure(done)
    assert "SenseRuntimeError" in done.stderr and reason in done.stderr, done.stderr
    path = call.split('"')[1]
    assert f"'{path}'" in done.stderr
    assert "main.sns:3:" in done.stderr or "main.sns:4:" in done.stderr or "main.sns:5:" in done.stderr
    assert done.stdout == "start\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_permission_denied_names_the_path(tmp_path):
    (tmp_path / "secret.txt").write_text("s")
    os.chmod(tmp_path / "secret.txt", 0)
    done = sense_run(tmp_path, IMPORT + 'x = read_text("secret.txt")\n')
    clean_failure(done)
    assert "permission denied" in done.stderr and "'secret.txt'" in done.stderr


@tiers
def test_write_then_rollback_restores_the_previous_bytes(tmp_path, tier):
    old = b"\xff\x00 not text \r\n"
    (tmp_path / "f.bin").write_bytes(old)
    done = sense_run(tmp_path, IMPORT + commit('write_text("f.bin", "new")') +
                     'print(read_text("f.bin"))\na.rollback()\n', tier=tier)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "new\n"
    assert (tmp_path / "f.bin").read_bytes() == old


@tiers
def test_rollback_removes_a_file_the_write_created(tmp_path, tier):
    done = sense_run(tmp_path, IMPORT + commit('write_text("new.txt", "x")') +
                     'print(exists("new.txt"))\na.rollback()\nprint(exists("new.txt"))\n',
                     tier=tier)
    assert done.stdout == "true\nfalse\n", done.stderr
    assert not (tmp_path / "new.txt").exists()


@tiers
def test_append_and_rollback_after_a_later_write(tmp_path, tier):
    (tmp_path / "log.txt").write_text("one\n")
    source = (IMPORT + commit('append_text("log.txt", "two\\n")') +
              'print(read_text("log.txt"))\n' + commit('write_text("log.txt", "later")', "b") +
              'a.rollback()\nprint(read_text("log.txt"))\n')
    done = sense_run(tmp_path, source, tier=tier)
    assert done.returncode == 0, done.stderr
    # Rolling back the append puts back the bytes from before it, the later write's too.
    assert done.stdout == "one\ntwo\n\none\n\n"
    assert (tmp_path / "log.txt").read_text() == "one\n"


@tiers
def test_make_dir_rollback_removes_only_an_empty_directory_it_made(tmp_path, tier):
    (tmp_path / "had").mkdir()
    source = (IMPORT + commit('make_dir("fresh")') + commit('make_dir("full")', "b") +
              commit('make_dir("had")', "c") + commit('write_text("full/x", "1")', "w") +
              "a.rollback()\nb.rollback()\nc.rollback()\n")
    done = sense_run(tmp_path, source, tier=tier)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "fresh").exists()
    assert (tmp_path / "full" / "x").read_text() == "1"
    assert (tmp_path / "had").is_dir()


@tiers
def test_remove_is_irreversible_and_needs_fs_delete(tmp_path, tier):
    (tmp_path / "gone.txt").write_text("x")
    (tmp_path / "kept.txt").write_text("x")
    done = sense_run(tmp_path, IMPORT + commit('remove("gone.txt")') +
                     'b = remove("kept.txt")\nb.rollback()\n', tier=tier)
    clean_failure(done)
    assert not (tmp_path / "gone.txt").exists()
    assert (tmp_path / "kept.txt").exists()
    denied = sense_run(tmp_path, "policy:\n    deny fs.delete\n" + IMPORT +
                       'b = remove("kept.txt")\nprint(b.verify())\nb.commit()\n', tier=tier)
    clean_failure(denied)
    assert (tmp_path / "kept.txt").exists()


@tiers
def test_a_denied_capability_leaves_nothing_written(tmp_path, tier):
    done = sense_run(tmp_path, "policy:\n    deny fs.write\n" + IMPORT +
                     commit('write_text("w.txt", "x")'), tier=tier)
    clean_failure(done)
    assert not (tmp_path / "w.txt").exists()
    # A caller's deny covers the functions it calls.
    source = (IMPORT + 'def save():\n    a = write_text("w.txt", "x")\n    a.verify()\n'
              '    a.commit()\ndef guarded():\n    policy:\n        deny fs.write\n    save()\n'
              'guarded()\n')
    done = sense_run(tmp_path, source, tier=tier)
    clean_failure(done)
    assert not (tmp_path / "w.txt").exists()
    read = sense_run(tmp_path, "policy:\n    deny fs.read\n" + IMPORT + 'x = read_text("main.sns")\n',
                     tier=tier)
    clean_failure(read)
    assert "fs.read" in read.stderr


@tiers
def test_dry_run_writes_nothing_and_still_reads(tmp_path, tier):
    (tmp_path / "in.txt").write_text("input")
    (tmp_path / "gone.txt").write_text("x")
    source = (IMPORT + 'print(read_text("in.txt"))\n' + commit('write_text("out.txt", "x")') +
              commit('append_text("in.txt", "more")', "b") + commit('make_dir("d")', "c") +
              commit('remove("gone.txt")', "r"))
    done = sense_run(tmp_path, source, "--dry-run", tier=tier)
    assert done.returncode == 0, done.stderr
    assert "\ninput\n" in done.stdout and "body not executed" in done.stdout
    assert not (tmp_path / "out.txt").exists() and not (tmp_path / "d").exists()
    assert (tmp_path / "in.txt").read_text() == "input"
    assert (tmp_path / "gone.txt").exists()


@tiers
def test_an_aborted_session_rolls_back_writes_and_drops_the_remove(tmp_path, tier):
    (tmp_path / "keep.txt").write_text("original")
    source = (IMPORT + "r = nil\nsession tidy as s:\n"
              '    a = write_text("keep.txt", "changed")\n    a.verify()\n    a.commit()\n'
              '    r = remove("keep.txt")\n    r.verify()\n    r.commit()\n'
              '    print(read_text("keep.txt"))\n    s.abort()\n'
              'print(r.state, read_text("keep.txt"))\n')
    done = sense_run(tmp_path, source, tier=tier)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "changed\ndropped original\n"
    assert (tmp_path / "keep.txt").read_text() == "original"


@tiers
def test_a_committed_session_fires_the_queued_remove(tmp_path, tier):
    (tmp_path / "old.txt").write_text("x")
    source = (IMPORT + "session tidy as s:\n"
              '    r = remove("old.txt")\n    r.verify()\n    r.commit()\n'
              '    print(exists("old.txt"))\n    m = s.manifest()\n    s.commit(m.hash)\n'
              'print(exists("old.txt"))\n')
    done = sense_run(tmp_path, source, tier=tier)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "true\nfalse\n"


CRASH_AT_REPLACE = (
    "import os\n_real = os.replace\n"
    "def _crash(src, dst, *a, **k):\n"
    "    if str(dst).endswith('data.txt'):\n        os._exit(9)\n"
    "    return _real(src, dst, *a, **k)\n"
    "os.replace = _crash\n")


@tiers
def test_a_crash_between_write_and_replace_leaves_the_old_file(tmp_path, tier):
    (tmp_path / "data.txt").write_text("old contents")
    done = sense_run(tmp_path, IMPORT + commit('write_text("data.txt", "new contents")'),
                     tier=tier, script=CRASH_AT_REPLACE)
    assert done.returncode == 9
    assert (tmp_path / "data.txt").read_text() == "old contents"
    done = sense_run(tmp_path, IMPORT + commit('write_text("data.txt", "new contents")'),
                     tier=tier)
    assert (tmp_path / "data.txt").read_text() == "new contents"


def test_read_text_is_labelled_untrusted_file(tmp_path, monkeypatch):
    from conftest import ROOT  # noqa: F401  (the tree on the path)
    from sensec.driver import compile_file
    from sensevm.bytecode.snb import dump
    from sensevm.bytecode.verify import load_verified
    from sensevm.guard import provenance as PV
    from sensevm.runtime.values import Scope
    from sensevm.runtime.vm import VM
    import io
    (tmp_path / "page.txt").write_text("hello")
    (tmp_path / "main.sns").write_text(IMPORT + 't = read_text("page.txt")\nn = list_dir(".")\n'
                                       'c = "clean"\n')
    monkeypatch.chdir(tmp_path)
    scopes = []

    def grab(self):
        scope = Scope(self.builtins, tag="module")
        scopes.append(scope)
        return self.run_unit(self.prepared, scope)
    monkeypatch.setattr(VM, "_run_main", grab)
    VM(load_verified(dump(compile_file(str(tmp_path / "main.sns")))), stdout=io.StringIO()).run()
    v = scopes[0].vars
    assert v["t"] == "hello" and PV.untrusted("file") in PV.origins_of(v["t"])
    assert all(PV.untrusted("file") in PV.origins_of(x) for x in v["n"])
    assert not PV.origins_of(v["c"])
