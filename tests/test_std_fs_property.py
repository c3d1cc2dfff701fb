"""std.fs's reversible writes against a model (hypothesis): any sequence of writes, appends and
rollbacks (of any earlier action, in any order) leaves the file exactly as the model says,
where a rollback puts back the bytes its own action found (or removes a file it created) and
a rolled-back action cannot be rolled back twice."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from stdlib_helpers import sense_run

TEXTS = st.sampled_from(["", "a", "hé", "line\\n", "zz"])
OPS = st.lists(st.one_of(st.tuples(st.just("write"), TEXTS), st.tuples(st.just("append"), TEXTS),
                         st.tuples(st.just("rollback"), st.integers(0, 7))),
               min_size=1, max_size=8)


def model_and_program(ops, exists: bool):
    content = "start" if exists else None
    lines = ["from std.fs import write_text, append_text, exists, read_text", "acts = []"]
    done = []           # (action index, the content it found, rolled back yet?)
    for op, arg in ops:
        if op in ("write", "append"):
            fn = "write_text" if op == "write" else "append_text"
            lines += [f'a = {fn}("f.txt", "{arg}")', "a.verify()", "a.commit()", "acts.push(a)"]
            done.append([content, False])
            text = arg.replace("\\n", "\n")
            content = text if op == "write" or content is None else content + text
        else:
            if not done:
                continue
            k = arg % len(done)
            if done[k][1]:
                continue    # (rolling back twice is a lifecycle error, tested elsewhere)
            lines.append(f"acts[{k}].rollback()")
            content = done[k][0]
            done[k][1] = True
    lines += ['if exists("f.txt"):', '    print("[" + read_text("f.txt") + "]")', "else:",
              '    print("absent")']
    expected = "absent\n" if content is None else f"[{content}]\n"
    return "\n".join(lines) + "\n", expected


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, exists=st.booleans())
def test_writes_and_rollbacks_follow_the_model(tmp_path_factory, ops, exists):
    tmp_path = tmp_path_factory.mktemp("fs")
    if exists:
        (tmp_path / "f.txt").write_text("start", encoding="utf-8")
    source, expected = model_and_program(ops, exists)
    done = sense_run(tmp_path, source, build=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected, source
    # No temporary file is left beside it, whatever happened.
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "main.sns") in (
        [], ["f.txt"])
