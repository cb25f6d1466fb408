# Two commands set up everything on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test proto lint format bench system-deps clean

$(PY):
	python3 -m venv $(VENV)

# Reinstall when the project's metadata changes.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

system-deps:
	@missing=""; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v rg >/dev/null || missing="$$missing ripgrep"; \
	command -v setpriv >/dev/null || missing="$$missing util-linux"; \
	command -v gcc >/dev/null || missing="$$missing gcc"; \
	command -v openssl >/dev/null || missing="$$missing openssl"; \
	command -v git >/dev/null || missing="$$missing git"; \
	if [ -n "$$missing" ]; then \
		echo "installing system packages:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

run: system-deps $(STAMP)
	$(VENV)/bin/agentd serve

test: system-deps $(STAMP)
	$(VENV)/bin/pytest -q

proto: $(STAMP)
	$(PY) scripts/gen_proto.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: system-deps $(STAMP)
	$(PY) bench/read_rtt.py
	$(PY) bench/bash_rtt.py
	$(PY) bench/bash_output.py
	$(PY) bench/classify.py

clean:
	rm -rf $(VENV) .pytest_cache
