#!/usr/bin/env bash
# `make image`: agentd's image with no registry. A root file system made by mmdebstrap
# from Debian bookworm's packages (packages.txt; every package's version checked
# against packages.lock), agentd and agentd-client installed into their own venv from
# wheels built here, imported with `podman import` as localhost/agentd:VERSION (and
# :latest). The layout is the Containerfile's (tests/image/test_image.py compares them).
#
# Environment: AGENTD_IMAGE_STRICT=1 (refuse Debian packages other than packages.lock's;
# by default the build says how they differ and goes on), AGENTD_IMAGE_CACHE (default ~/.cache/agentd/image: the root file system
# per packages.txt, pip's downloads), AGENTD_IMAGE_MIRROR (a Debian mirror),
# AGENTD_IMAGE_RELOCK=1 (rewrite packages.lock from what the mirror gave), IMAGE
# (default localhost/agentd).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${AGENTD_IMAGE_CACHE:-$HOME/.cache/agentd/image}"
mirror="${AGENTD_IMAGE_MIRROR:-http://deb.debian.org}"
image="${IMAGE:-localhost/agentd}"
python="${PYTHON3:-python3}"

started=$(date +%s)
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/pyproject.toml")
revision=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
source=$(git -C "$repo" remote get-url origin 2>/dev/null || echo "file://$repo")
mkdir -p "$cache"
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# 1. The root file system, cached per packages.txt and this script: mmdebstrap's
# "essential" variant (no apt in the image) plus the listed packages and their
# dependencies, without recommends, docs, manuals or translations.
packages=$(grep -v '^#' "$here/packages.txt" | grep -v '^$' | paste -sd, -)
# The cache's key: the package list and the recipe (bump it when mmdebstrap's options
# below change).
recipe=1
key=$( (cat "$here/packages.txt"; echo "$recipe") | sha256sum | cut -c1-16)
rootfs="$cache/rootfs-$key.tar"
# Reproducible file times: the lock's last change, or a fixed date without git.
lock_time=$(git -C "$repo" log -1 --format=%ct -- deploy/image/packages.lock 2>/dev/null || true)
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-${lock_time:-1700000000}}"
if [ ! -s "$rootfs" ]; then
	echo "image: the root file system (mmdebstrap, bookworm: $packages)"
	TMPDIR="$work" mmdebstrap --quiet --mode=root --variant=essential \
		--include="$packages" \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-include=/usr/share/doc/*/copyright' \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/info/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--dpkgopt='path-include=/usr/share/locale/locale.alias' \
		--customize-hook='rm -rf "$1"/var/cache/* "$1"/var/log/*.log "$1"/var/lib/apt/lists/*' \
		bookworm "$work/rootfs.tar" \
		"deb $mirror/debian bookworm main" \
		"deb $mirror/debian bookworm-updates main" \
		"deb $mirror/debian-security bookworm-security main"
	mv "$work/rootfs.tar" "$rootfs"
fi

# 2. The pinned versions: every package the root file system holds, as packages.lock
# has it. A mirror moves on with Debian's point releases; relock then, and commit it.
mkdir "$work/rootfs"
tar -x -C "$work/rootfs" -f "$rootfs"
installed="$work/packages.lock"
{
	echo "# Every Debian package in agentd's image, as name=version (deploy/image/build.sh checks it)."
	chroot "$work/rootfs" dpkg-query -W -f '${Package}=${Version}\n' | LC_ALL=C sort
} >"$installed"
if [ "${AGENTD_IMAGE_RELOCK:-}" = 1 ]; then
	cp "$installed" "$here/packages.lock"
elif ! diff -u "$here/packages.lock" "$installed" >"$work/lock.diff"; then
	# Debian's mirror keeps only the current versions: a security update changes them.
	# The image then holds the mirror's, and says which in /etc/agentd/packages.lock.
	cat "$work/lock.diff" >&2
	echo "image: the mirror's packages differ from deploy/image/packages.lock (above);" \
		"to take them: AGENTD_IMAGE_RELOCK=1 make image, and commit the lock" >&2
	[ "${AGENTD_IMAGE_STRICT:-}" = 1 ] && exit 1
fi

# 3. agentd's two wheels, built here from a copy of the sources (setuptools builds in
# the tree); their dependencies resolved inside the root file system, for its Python
# (Debian's 3.11.2: a newer host Python would pick releases it cannot run), from PyPI.
src="$work/src"
mkdir "$src"
tar -C "$repo" -c --exclude=__pycache__ --exclude='*.egg-info' --exclude=build \
	pyproject.toml agentd agentd_sandbox client | tar -x -C "$src"
"$python" -m pip wheel -q --no-deps --wheel-dir "$work/rootfs/tmp/wheels" "$src/client" "$src"

# 4. The Containerfile's layout: the venv in /opt/agentd/venv, the commands on PATH,
# the config, the volumes' mount points (the workspace the sandbox identity's).
mkdir -p "$cache/pip"
mv "$cache/pip" "$work/rootfs/tmp/pip-cache"
cp -a "$work/rootfs/etc/resolv.conf" "$work/resolv.conf"
cp /etc/resolv.conf "$work/rootfs/etc/resolv.conf"
# PyPI as this host reaches it: its resolver and the CAs it trusts (a proxy's too).
cp "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$work/rootfs/tmp/host-ca.pem"
# The versions requirements.lock pins (AGENTD_IMAGE_RELOCK=1: what PyPI has now).
: >"$work/rootfs/tmp/constraints.txt"
if [ "${AGENTD_IMAGE_RELOCK:-}" != 1 ]; then
	grep -v '^#' "$here/requirements.lock" >"$work/rootfs/tmp/constraints.txt"
fi
in_rootfs() {
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root PIP_CACHE_DIR=/tmp/pip-cache \
		PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_DEFAULT_TIMEOUT=180 PIP_CERT=/tmp/host-ca.pem \
		chroot "$work/rootfs" "$@"
}
status=0
in_rootfs python3 -m venv /opt/agentd/venv &&
	in_rootfs /opt/agentd/venv/bin/pip install -q --find-links /tmp/wheels \
		--constraint /tmp/constraints.txt \
		"agentd-client[anthropic,mcp]==$version" "agentd==$version" || status=$?
mv "$work/rootfs/tmp/pip-cache" "$cache/pip"
mv "$work/resolv.conf" "$work/rootfs/etc/resolv.conf"
[ "$status" = 0 ] || exit "$status"
{
	echo "# The Python packages in agentd's image (deploy/image/build.sh installs these versions)."
	in_rootfs /opt/agentd/venv/bin/pip freeze --all --exclude agentd --exclude agentd-client |
		LC_ALL=C sort -f
} >"$work/requirements.lock"
if [ "${AGENTD_IMAGE_RELOCK:-}" = 1 ]; then
	cp "$work/requirements.lock" "$here/requirements.lock"
fi
rm -rf "$work/rootfs/tmp/wheels" "$work/rootfs/tmp/constraints.txt" "$work/rootfs/tmp/host-ca.pem"
# What the image holds, as the locks write it.
install -D -m 0644 -t "$work/rootfs/etc/agentd" "$installed" "$work/requirements.lock"
for cmd in agentd agentctl agentd-sandbox; do
	ln -s "/opt/agentd/venv/bin/$cmd" "$work/rootfs/usr/local/bin/$cmd"
done
install -D -m 0644 "$repo/deploy/container/config.toml" "$work/rootfs/etc/agentd/config.toml"
install -d -m 0755 "$work/rootfs/var/lib/agentd" "$work/rootfs/run/agentd" "$work/rootfs/workspace"
chown 65534:65534 "$work/rootfs/workspace"

# 5. Imported, with the Containerfile's environment, volumes, ports and entrypoint.
old=$(podman image inspect --format '{{.Id}}' "$image:$version" 2>/dev/null || true)
tar -C "$work/rootfs" --numeric-owner --sort=name --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime -c . |
	podman import \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'ENV AGENTD_SOCKET=/run/agentd/sock/agentd.sock' \
		--change 'ENV AGENTD_STATE_DIR=/var/lib/agentd/state' \
		--change 'ENV AGENTD_CONFIG=/etc/agentd/config.toml' \
		--change 'VOLUME ["/var/lib/agentd", "/workspace"]' \
		--change 'EXPOSE 7777' \
		--change 'STOPSIGNAL SIGTERM' \
		--change 'ENTRYPOINT ["agentd"]' \
		--change 'CMD ["serve"]' \
		--change "LABEL org.opencontainers.image.title=agentd" \
		--change "LABEL org.opencontainers.image.version=$version" \
		--change "LABEL org.opencontainers.image.revision=$revision" \
		--change "LABEL org.opencontainers.image.source=$source" \
		--change "LABEL org.opencontainers.image.base.name=debian:bookworm (mmdebstrap, deploy/image/packages.lock)" \
		- "$image:$version" >/dev/null
podman tag "$image:$version" "$image:latest"
# The build this one replaces, once no tag names it.
if [ -n "$old" ] && [ -z "$(podman image inspect --format '{{.RepoTags}}' "$old" | tr -d '[]')" ]; then
	podman rmi "$old" >/dev/null || true
fi
size=$(podman image inspect --format '{{.Size}}' "$image:$version")
echo "image: $image:$version (and :latest), $((size / 1000000)) MB, built in $(($(date +%s) - started)) s"
