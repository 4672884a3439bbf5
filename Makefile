# The two commands: `make demo` and `make test`. Both work on a fresh machine
# with only Python 3.11+ and git: they create .venv and install what they need.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: docs lock demo test lint bench install-kernel clean fuzz notebooks local-model local-model-stop eval-local

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test,lint,docs]'
	touch $(STAMP)

# Refresh constraints.txt on purpose: the newest versions pyproject.toml's
# ranges allow, resolved in a scratch venv; then run `make test` before
# committing the new file.
lock:
	rm -rf build/lock-venv
	$(PY) -m venv build/lock-venv
	build/lock-venv/bin/python -m pip install -q --upgrade pip
	build/lock-venv/bin/python -m pip install -q -e '.[test,lint,docs]'
	{ sed -n '1,/^[^#]/{/^#/p}' constraints.txt; \
	  build/lock-venv/bin/python -m pip freeze --exclude-editable | grep -v '^-e'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf build/lock-venv

install-kernel: $(STAMP)
	$(BIN)/cortex-kernel install --sys-prefix

demo: $(STAMP) install-kernel
	$(BIN)/python -m cortex_kernel demo

lint: $(STAMP)
	$(BIN)/ruff check cortex_kernel tests benchmarks scripts
	$(BIN)/ruff format --check cortex_kernel tests benchmarks scripts
	$(BIN)/mypy

test: lint install-kernel
	sh scripts/ensure-chromium.sh
	$(BIN)/python -m pytest

# The manual (docs/, MkDocs + Material) as a static site in build/site;
# --strict turns every broken link or anchor into an error.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet

bench: $(STAMP)
	$(BIN)/cortex-kernel bench

# The parser fuzz target, EXAMPLES split over JOBS processes with distinct
# hypothesis seeds (scripts/fuzz.py); SEED fixes the base seed.
EXAMPLES ?= 200000
JOBS ?= 1
fuzz: $(STAMP)
	$(BIN)/python scripts/fuzz.py --examples $(EXAMPLES) --jobs $(JOBS) $(if $(SEED),--seed $(SEED))

clean:
	rm -rf $(VENV) build dist .mypy_cache .pytest_cache .ruff_cache

# Regenerate the example notebooks from scripts/make_notebooks.py and store
# their outputs (what nbval compares in `make test`).
notebooks: $(STAMP) install-kernel
	$(BIN)/python scripts/make_notebooks.py
	cd notebooks && for nb in *.ipynb; do ../$(BIN)/jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.store_widget_state=False "$$nb" || exit 1; done

# A real model on this machine (not part of `make test`): Qwen2.5-Coder-1.5B
# served by llama-cpp-python on 127.0.0.1:$(PORT). See README "A local model".
PORT ?= 8377
local-model:
	$(PY) scripts/local_model.py start --port $(PORT)

local-model-stop:
	$(PY) scripts/local_model.py stop

# The default eval suite against the local model (tens of seconds per task on
# 2 cores; PROTOCOL=tools for function calling). Reports go to benchmarks/results/.
PROTOCOL ?= xml
eval-local: $(STAMP) local-model
	$(BIN)/cortex-kernel eval --model openai/local --api-base http://127.0.0.1:$(PORT)/v1 --protocol $(PROTOCOL)
