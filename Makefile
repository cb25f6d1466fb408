# Two commands set up everything on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: launcher run run-background stop test test-slow test-clones proto lint docs format bench system-deps clean \
	install install-user claude-code codex nginx dist image image-deps test-image

# `make install`: agentd in $(PREFIX)/bin (its own venv in $(PREFIX)/lib/agentd), the
# system unit in $(SYSTEMD_SYSTEM_DIR) with ExecStart pointing there, and an empty
# config in $(CONFDIR). The shipped unit names /usr/local/bin/agentd.
PREFIX ?= /usr/local
SYSTEMD_SYSTEM_DIR ?= /etc/systemd/system
CONFDIR ?= /etc/agentd
# `make install-user`: the same for one user, into ~/.local
USER_PREFIX ?= $(HOME)/.local
SYSTEMD_USER_DIR ?= $(HOME)/.config/systemd/user
PYTHON3 ?= python3
# Both installs build agentd and agentd-client from a copy of their sources in a temp
# dir: setuptools builds where the sources are (build/, *.egg-info), and the checkout is
# not the install's to change (agentd-launch is built in the copy too). $(1): the pip of
# the venv to install into.
INSTALL_SOURCES := pyproject.toml agentd agentd_sandbox client
pip_install_a_copy = src=$$(mktemp -d) && trap 'rm -rf "$$src"' EXIT && \
	tar -c --exclude=__pycache__ --exclude='*.egg-info' --exclude=build \
		--exclude=$(LAUNCHER) $(INSTALL_SOURCES) | tar -x -C "$$src" && \
	$(call build_launcher,"$$src/$(LAUNCHER)","$$src/$(LAUNCHER).c") && \
	$(1) install -q "$$src/client[$(CLIENT_EXTRAS)]" "$$src"
# `make dist`: the client's wheel, and beside it the wheels of everything it and its
# extras need on this platform and Python, for a laptop to install with no index.
DIST ?= dist
# What the installs give agentctl: every command it ships (mcp, agent) works.
CLIENT_EXTRAS := anthropic,mcp

# The reference (Claude Code, a native binary from the npm registry) that the live tests
# run: installed outside the repo, once per version.
CLAUDE_CODE_VERSION := 2.1.328
CLAUDE_CODE_DIR ?= $(HOME)/.cache/agentd/claude-code
CLAUDE_CODE_STAMP := $(CLAUDE_CODE_DIR)/.installed-$(CLAUDE_CODE_VERSION)
# Codex, for the test that runs it against `agentctl mcp` (tests/e2e/test_mcp_codex.py).
CODEX_VERSION := 0.169.0
CODEX_DIR ?= $(HOME)/.cache/agentd/codex
CODEX_STAMP := $(CODEX_DIR)/.installed-$(CODEX_VERSION)
# The entry point that routes TLS by name to many daemons (deploy/router/): Debian's nginx
# and its stream module, unpacked (never installed: no service starts on the host).
NGINX_DIR ?= $(HOME)/.cache/agentd/nginx
NGINX_STAMP := $(NGINX_DIR)/.unpacked

# The sandbox chain's one-exec helper (agentd_sandbox/launcher.py), built beside its
# source; without it a root daemon starts sandboxes through the slower argv chain.
LAUNCHER := agentd_sandbox/launch/agentd-launch

build_launcher = $(CC) -O2 -Wall -Wextra -Werror -o $(1) $(2)

$(LAUNCHER): $(LAUNCHER).c
	$(call build_launcher,$@,$<)

launcher: $(LAUNCHER)

$(PY):
	@echo "==> creating the virtualenv $(VENV) (python3 -m venv)"
	python3 -m venv $(VENV)

# Reinstall when the project's metadata changes. The client is its own distribution
# (client/pyproject.toml) that the daemon depends on: both are installed editable in
# one resolve, so agentd-client comes from ./client and never from an index.
$(STAMP): pyproject.toml client/pyproject.toml | $(PY) $(LAUNCHER)
	@echo "==> upgrading pip in $(VENV)"
	$(PY) -m pip install -q --upgrade pip
	@echo "==> installing agentd, agentctl and their dependencies into $(VENV)" \
		"(pip: a few minutes on a fresh machine; each package is named as it comes)"
	set -o pipefail; $(PY) -m pip install --progress-bar off -e './client[$(CLIENT_EXTRAS)]' -e '.[dev]' \
		| { grep -E --line-buffered '^(Collecting|Successfully installed)' || true; }
	@# A venv from before the split: removing the old agentd removed the agentctl
	@# script it used to own; the client's install puts it back.
	$(PY) -m pip install -q --no-deps -e ./client
	touch $(STAMP)

system-deps:
	@echo "==> checking the system packages agentd needs (bwrap, ripgrep, git, gcc...)"
	@missing=""; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v rg >/dev/null || missing="$$missing ripgrep"; \
	command -v setpriv >/dev/null || missing="$$missing util-linux"; \
	command -v gcc >/dev/null || missing="$$missing gcc"; \
	command -v openssl >/dev/null || missing="$$missing openssl"; \
	command -v git >/dev/null || missing="$$missing git"; \
	command -v systemd-analyze >/dev/null || missing="$$missing systemd"; \
	command -v strace >/dev/null || missing="$$missing strace"; \
	command -v mkfs.ext4 >/dev/null || missing="$$missing e2fsprogs"; \
	command -v npm >/dev/null || missing="$$missing nodejs npm"; \
	command -v ssh >/dev/null || missing="$$missing openssh-client"; \
	test -x /usr/sbin/sshd || missing="$$missing openssh-server"; \
	command -v curl >/dev/null || missing="$$missing curl"; \
	command -v gh >/dev/null || missing="$$missing gh"; \
	command -v direnv >/dev/null || missing="$$missing direnv"; \
	command -v nvim >/dev/null || missing="$$missing neovim"; \
	/usr/bin/python3 -c 'import pip' 2>/dev/null || missing="$$missing python3-pip"; \
	if [ -n "$$missing" ]; then \
		echo "==> installing system packages with apt-get:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi

run: system-deps $(STAMP) $(LAUNCHER)
	@echo "==> starting agentd in the foreground (Ctrl-C stops it; make run-background does not hold a terminal)"
	$(VENV)/bin/agentd serve

# The daemon in the background for a person's session (no systemd needed): its log in
# the state dir; `make stop` stops it.
run-background: system-deps $(STAMP) $(LAUNCHER)
	$(VENV)/bin/agentd serve --detach

stop:
	$(VENV)/bin/agentd stop

test: system-deps $(STAMP) $(LAUNCHER) claude-code codex nginx
	$(VENV)/bin/pytest -q -n auto --dist loadfile --cov --cov-report=term -m "not slow"

# What is too heavy or too timing-bound for `make test`, alone on the machine.
test-slow: system-deps $(STAMP) $(LAUNCHER)
	$(VENV)/bin/pytest -q -p no:xdist -m slow

# A slice of the suite from fresh clones of this checkout, one under /tmp and one in a
# directory only its owner may enter: nothing may depend on where the checkout lives.
test-clones: system-deps $(STAMP)
	$(PY) scripts/test_clones.py

claude-code: $(CLAUDE_CODE_STAMP)

$(CLAUDE_CODE_STAMP): | system-deps
	mkdir -p $(CLAUDE_CODE_DIR)
	npm install --prefix $(CLAUDE_CODE_DIR) --no-audit --no-fund --loglevel=error \
		@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION)
	DISABLE_AUTOUPDATER=1 $(CLAUDE_CODE_DIR)/node_modules/.bin/claude --version
	touch $(CLAUDE_CODE_STAMP)

nginx: $(NGINX_STAMP)

$(NGINX_STAMP): | system-deps
	rm -rf $(NGINX_DIR) && mkdir -p $(NGINX_DIR)/debs
	cd $(NGINX_DIR)/debs && apt-get download nginx libnginx-mod-stream 2>/dev/null || \
		(apt-get update -qq && apt-get download nginx libnginx-mod-stream)
	for deb in $(NGINX_DIR)/debs/*.deb; do dpkg-deb -x $$deb $(NGINX_DIR)/root; done
	$(NGINX_DIR)/root/usr/sbin/nginx -v
	touch $(NGINX_STAMP)

codex: $(CODEX_STAMP)

$(CODEX_STAMP): | system-deps
	mkdir -p $(CODEX_DIR)
	npm install --prefix $(CODEX_DIR) --no-audit --no-fund --loglevel=error \
		@openai/codex@$(CODEX_VERSION)
	$(CODEX_DIR)/node_modules/.bin/codex --version
	touch $(CODEX_STAMP)

proto: $(STAMP)
	$(PY) scripts/gen_proto.py

# The documentation site (mkdocs.yml, docs/): built with --strict, offline, into the venv
# so the checkout stays clean. The reference pages come from the code (scripts/gen_docs.py;
# tests/docs/test_docs.py checks they are up to date).
SITE_DIR ?= $(VENV)/site
MKDOCS := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(MKDOCS) build --strict --quiet --site-dir $(SITE_DIR)

docs: $(STAMP)
	$(PY) scripts/gen_docs.py
	$(MKDOCS) build --strict --site-dir $(SITE_DIR)
	@echo "the site: $(SITE_DIR)/index.html (or: $(MKDOCS) serve)"

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: system-deps $(STAMP) $(LAUNCHER)
	$(PY) bench/read_rtt.py
	$(PY) bench/bash_rtt.py
	$(PY) bench/bash_output.py
	$(PY) bench/classify.py
	$(PY) bench/search.py
	$(PY) bench/enforce_corpus.py
	$(PY) bench/changes.py
	$(PY) bench/attach_burst.py

install:
	$(PYTHON3) -m venv --clear $(PREFIX)/lib/agentd
	$(call pip_install_a_copy,$(PREFIX)/lib/agentd/bin/pip)
	install -d $(PREFIX)/bin $(SYSTEMD_SYSTEM_DIR)
	for cmd in agentd agentctl agentd-sandbox; do \
		ln -sfn ../lib/agentd/bin/$$cmd $(PREFIX)/bin/$$cmd; \
	done
	sed -e 's|^ExecStart=/usr/local/bin/agentd |ExecStart=$(PREFIX)/bin/agentd |' \
		-e 's|^Environment=AGENTD_CONFIG=/etc/agentd/config.toml$$|Environment=AGENTD_CONFIG=$(CONFDIR)/config.toml|' \
		systemd/system/agentd.service > $(SYSTEMD_SYSTEM_DIR)/agentd.service
	chmod 0644 $(SYSTEMD_SYSTEM_DIR)/agentd.service
	install -d -m 0755 $(CONFDIR)
	test -e $(CONFDIR)/config.toml || \
		printf '# agentd settings: see docs/configuration.md and docs/reference/config.md.\n' > $(CONFDIR)/config.toml
	@echo "installed; now: systemctl daemon-reload && systemctl enable --now agentd"

install-user:
	$(PYTHON3) -m venv --clear $(USER_PREFIX)/share/agentd/venv
	$(call pip_install_a_copy,$(USER_PREFIX)/share/agentd/venv/bin/pip)
	install -d $(USER_PREFIX)/bin $(SYSTEMD_USER_DIR)
	for cmd in agentd agentctl agentd-sandbox; do \
		ln -sfn $(USER_PREFIX)/share/agentd/venv/bin/$$cmd $(USER_PREFIX)/bin/$$cmd; \
	done
	if [ "$(USER_PREFIX)" = "$(HOME)/.local" ]; then \
		install -m 0644 systemd/user/agentd.service $(SYSTEMD_USER_DIR)/agentd.service; \
	else \
		sed 's|^ExecStart=%h/.local/bin/agentd |ExecStart=$(USER_PREFIX)/bin/agentd |' \
			systemd/user/agentd.service > $(SYSTEMD_USER_DIR)/agentd.service; \
	fi
	@echo "installed; now: systemctl --user daemon-reload && systemctl --user enable --now agentd"

# A laptop then runs `pip install DIST/agentd_client-*.whl` (with an index), or with
# none: `pip install --no-index --find-links DIST 'DIST/agentd_client-VERSION-py3-none-any.whl[mcp]'`.
dist: $(STAMP)
	rm -rf client/build  # setuptools builds in the tree; a stale one breaks the wheel
	$(PY) -m pip wheel -q --wheel-dir $(DIST) "./client[$(CLIENT_EXTRAS)]"
	rm -rf client/build
	@ls $(DIST)/agentd_client-*.whl

# `make image`: agentd's image with no registry (deploy/image/build.sh): Debian's
# packages by mmdebstrap, agentd's own wheels, imported with podman as
# localhost/agentd:VERSION and :latest. `make test-image` builds it and runs the pod
# tests (tests/image/): the manifests' pod run by `podman kube play`.
image: image-deps
	deploy/image/build.sh

# podman and runc (crun refuses a cgroup v1 host with a cgroup2 mount), and the ids a
# pod with a user namespace of its own (hostUsers: false) is given: podman takes them
# from the "containers" ranges in /etc/subuid and /etc/subgid.
image-deps:
	@missing=""; \
	command -v mmdebstrap >/dev/null || missing="$$missing mmdebstrap"; \
	command -v podman >/dev/null || missing="$$missing podman"; \
	command -v runc >/dev/null || missing="$$missing runc"; \
	if [ -n "$$missing" ]; then \
		echo "installing system packages:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@for f in /etc/subuid /etc/subgid; do \
		grep -q '^containers:' $$f 2>/dev/null || echo 'containers:2147483647:2147483648' >> $$f; \
	done

# One worker, in the machine's own mount namespace: podman's mounts must be seen by
# every podman call (make test's workers each mount in a namespace of their own).
test-image: system-deps $(STAMP) image nginx
	AGENTD_IMAGE_TESTS=1 $(VENV)/bin/pytest -q -p no:xdist tests/image

clean:
	rm -rf $(VENV) .pytest_cache
