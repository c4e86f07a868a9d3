# privfed: `make demo` and `make test` install whatever is missing first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: install test test-fast lint demo bench proto clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

test: install
	$(PY) -m pytest -q

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test-fast: install
	$(PY) -m pytest -q -m "not slow"

demo: install
	$(VENV)/bin/privfed simulate --task ncc --dataset synthetic --owners 200 --processes 2 --epsilon 0.5,1,2,4,8 --out runs

bench: install
	$(PY) bench/mechanisms.py
	$(PY) bench/securesum.py
	$(PY) bench/federation.py

proto: install
	$(PY) deploy/protogen.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
