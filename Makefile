# privfed: `make demo` and `make test` install whatever is missing first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: install bytecode test test-fast lint demo bench fuzz soak proto clean reproduce reproduce-quick

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The project's own modules as bytecode, once per change: where PYTHONDONTWRITEBYTECODE is set (CI's
# machine sets it) Python never writes a .pyc, so every process the tests start (owner nodes,
# coordinators, experiments) compiled the 70 to 250 modules it imports anew, about 0.15 s of CPU each
# time. Python checks each .pyc against its source's size and mtime: an edited file is read from source.
bytecode: install
	$(PY) -m compileall -q privfed common server owner proto deploy tests

# The in-process tests (unit, statistical, protocol: no clocks, no child processes) on two workers, then the
# adversary tests marked in_process (counted with no clock) on two workers too, then every other suite (the
# multi-process, network and netns tests) on two workers as well: those mostly wait on their processes and sockets
# (1.4 cores busy on average), and none measures time (the side-channel tests count work, with no clock). The first
# half took 317 s alone and 178 s on two workers (2 cores, stop 46); the marked adversary files about 130 s and 80 s
# (stop 47); the rest 872 s alone and 635 s on two workers (stop 54), most of a CI run: it prints its slowest tests.
# A test marked alone (the quick reproduce report, two experiments at a time under a timeout each) runs last, by
# itself: beside another worker it took 205 s instead of 153, and 404 s on a loaded machine, past its timeout.
IN_PROCESS := tests/unit tests/statistical tests/protocol
test: bytecode
	$(PY) -m pytest -q -n 2 $(IN_PROCESS)
	$(PY) -m pytest -q -n 2 -m in_process tests/adversary
	$(PY) -m pytest -q -n 2 --durations=25 -m "not in_process and not alone" $(addprefix --ignore=,$(IN_PROCESS))
	$(PY) -m pytest -q --durations=5 -m alone $(addprefix --ignore=,$(IN_PROCESS))

# ruff check includes the complexity limit (C901, pyproject); the two tests are issue 25's gates:
# no import cycle, no Any in the boundaries' signatures.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -p no:cacheprovider tests/unit/test_import_cycles.py tests/unit/test_typed_boundaries.py tests/unit/test_layering.py

test-fast: bytecode
	$(PY) -m pytest -q -m "not slow"

demo: install
	$(VENV)/bin/privfed simulate --task bdt --dataset anes96 --owners 755 --processes 2 --epsilon 2,4,8 --out runs

bench: install
	$(PY) bench/mechanisms.py
	$(PY) bench/securesum.py
	$(PY) bench/secagg_graph.py
	$(PY) bench/federation.py
	$(PY) bench/footprint.py
	$(PY) bench/ledger.py
	$(PY) bench/launcher.py
	$(PY) bench/scale.py
	$(PY) bench/coordinator_memory.py
	$(PY) bench/key_binding.py
	$(PY) bench/soak.py
	$(PY) bench/timing_channels.py
	$(PY) bench/timing_paths.py
	$(PY) bench/logistic_fit.py
	$(PY) bench/row_padding.py

# A longer hunt than CI's (tests/fuzz: 60 examples per RPC, 25 task batches).
fuzz: bytecode
	PRIVFED_FUZZ_EXAMPLES=2000 $(PY) -m pytest -q tests/fuzz

# Not in CI (tests/soak runs its short variant there): 1000 consecutive jobs, 100 nodes x 100 owners.
soak: bytecode
	PRIVFED_SOAK_JOBS=1000 PRIVFED_SOAK_NODES=100 PRIVFED_SOAK_OWNERS=100 $(PY) -m pytest -q -s tests/soak

# Every table and figure of the seed papers into reports/<UTC date>/index.html (README, "Reproducing
# the papers"): under 30 minutes on 2 cores; exits 1 when an experiment failed (the report says which).
reproduce: install
	$(VENV)/bin/privfed reproduce

# The same report at small n and repeats, about 5 minutes on 2 shared cores: reports/<UTC date>-quick/.
reproduce-quick: install
	$(VENV)/bin/privfed reproduce --quick

proto: install
	$(PY) deploy/protogen.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
