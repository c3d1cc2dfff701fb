"""The VS Code extension (editors/vscode): its grammar is made from the language's tables, its language configuration indents after ':', and it packages into a .vsix with @vscode/vsce."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from sensevm.base.builtins import BUILTINS
from sensevm.base.keywords import KEYWORDS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXT = os.path.join(ROOT, "editors", "vscode")
ENV = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
# What npm says when it cannot reach the registry (no network, no DNS, a proxy refusing).
OFFLINE = re.compile(r"ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNREFUSED|ECONNRESET|ENETUNREACH|"
                     r"network|proxy|getaddrinfo|certificate", re.IGNORECASE)


def _json(name):
    with open(os.path.join(EXT, name), encoding="utf-8") as fh:
        return json.load(fh)


def test_the_grammar_is_the_one_make_grammar_writes():
    proc = subprocess.run([sys.executable, os.path.join(EXT, "make_grammar.py"), "--check"],
                          env=ENV, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_the_grammar_highlights_every_keyword_and_builtin():
    repo = _json("syntaxes/sense.tmLanguage.json")["repository"]
    keyword_res = [re.compile(p["match"]) for p in repo["keyword"]["patterns"]]
    for word in KEYWORDS:
        assert any(r.fullmatch(word) for r in keyword_res), word
    builtin = re.compile(repo["builtin"]["match"])
    for b in BUILTINS:
        assert builtin.match(b.name + "("), b.name
    assert not builtin.match("printer(")


def test_the_language_configuration_indents_after_a_colon():
    conf = _json("language-configuration.json")
    assert conf["comments"]["lineComment"] == "#"
    assert ["(", ")"] in conf["brackets"] and ["[", "]"] in conf["brackets"]
    indent = re.compile(conf["indentationRules"]["increaseIndentPattern"])
    for line in ("def f(x):", "    if x > 1:  # big", "rollback:", "policy:", 'test "t":'):
        assert indent.match(line), line
    for line in ("x = 1", "# a note:", 'print("a:")  # no'):
        assert not indent.match(line), line


def test_the_manifest_declares_the_language_grammar_and_client():
    pkg = _json("package.json")
    [lang] = pkg["contributes"]["languages"]
    assert lang["id"] == "sense" and lang["extensions"] == [".sns"]
    [grammar] = pkg["contributes"]["grammars"]
    assert os.path.isfile(os.path.join(EXT, grammar["path"]))
    assert os.path.isfile(os.path.join(EXT, pkg["main"]))
    assert pkg["contributes"]["configuration"]["properties"]["sense.server.args"]["default"] \
        == ["lsp"]
    with open(os.path.join(EXT, pkg["main"]), encoding="utf-8") as fh:
        assert "vscode-languageclient/node" in fh.read()


def test_it_packages_into_a_vsix(tmp_path):
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the .vsix cannot be packaged here")
    work = tmp_path / "vscode"
    shutil.copytree(EXT, work, ignore=shutil.ignore_patterns("node_modules", "*.vsix"))
    try:
        proc = subprocess.run([npm, "install", "--no-audit", "--no-fund"], cwd=work,
                              capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        pytest.skip("npm install took over 10 minutes: the registry is too slow or unreachable")
    if proc.returncode != 0:
        if OFFLINE.search(proc.stderr + proc.stdout):
            pytest.skip("the npm registry is unreachable, so @vscode/vsce cannot be "
                        f"installed: {proc.stderr.strip().splitlines()[-1:]}")
        pytest.fail(f"npm install failed:\n{proc.stderr}")
    proc = subprocess.run([npm, "run", "package"], cwd=work, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with zipfile.ZipFile(work / "sense.vsix") as vsix:
        names = set(vsix.namelist())
        manifest = json.loads(vsix.read("extension/package.json"))
    assert {"extension/extension.js", "extension/language-configuration.json",
            "extension/syntaxes/sense.tmLanguage.json"} <= names
    assert any(n.startswith("extension/node_modules/vscode-languageclient/") for n in names)
    assert not any("make_grammar.py" in n or "@vscode/vsce" in n for n in names)
    assert manifest["name"] == "sense"
