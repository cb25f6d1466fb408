# Two commands set up everything on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test proto lint format bench system-deps clean

$(PY):
	python3 -m venv $(VENV)

# Reinstall when the project's metadata changes. The client is its own distribution
# (client/pyproject.toml) that the daemon depends on: both are installed editable in
# one resolve, so agentd-client comes from ./client and never from an index.
$(STAMP): pyproject.toml client/pyproject.toml | $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e './client[cli,anthropic,mcp]' -e '.[dev]'
	@# A venv from before the split: removing the old agentd removed the agentctl
	@# script it used to own; the client's install puts it back.
	$(PY) -m pip install -q --no-deps -e ./client
	touch $(STAMP)

system-deps:
	@missing=""; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v rg >/dev/null || missing="$$missing ripgrep"; \
	command -v setpriv >/dev/null || missing="$$missing util-linux"; \
	command -v gcc >/dev/null || missing="$$missing gcc"; \
	command -v openssl >/dev/null || missing="$$missing openssl"; \
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
