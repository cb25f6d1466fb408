"""What this machine's sandbox supports and what is actually in force, probed for real."""

from __future__ import annotations

import os
import subprocess
from typing import Any

from . import bwrap, cgroups, identity, launcher, limits, seccomp
from .errors import SandboxUnavailable
from .policy import SandboxPolicy
from .runner import orphan_guard_prefix, run


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _inside_status() -> dict[str, str]:
    """/proc/self/status as seen by a process in a default sandbox."""
    read_fd, write_fd = os.pipe()
    try:
        with os.fdopen(read_fd, "rb") as reader:
            try:
                rc = run(
                    SandboxPolicy(),
                    ["cat", "/proc/self/status"],
                    stdout=write_fd,
                    stderr=subprocess.DEVNULL,
                )
            finally:
                os.close(write_fd)
            text = reader.read().decode(errors="replace")
    except SandboxUnavailable as exc:
        return {"error": str(exc)}
    if rc != 0:
        return {"error": f"sandboxed cat exited {rc}"}
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields


def _cgroups() -> dict[str, Any] | None:
    """The control group hierarchy a caller's groups would go in here, if any."""
    found = cgroups.detect()
    if found is None:
        return None
    return {
        "version": found.version,
        "controllers": sorted(found.controllers),
        "parents": found.parents(),
    }


def check() -> dict[str, Any]:
    """Supported protections and which are in force, as a JSON-ready dict."""
    path = bwrap.find_bwrap()
    ident = identity.resolve(SandboxPolicy())
    # As a start does it (runner.prepare): setpriv drops ids when it is there.
    dropping = bool(identity.setpriv_prefix(ident))
    report: dict[str, Any] = {
        "bwrap_path": path,
        "bwrap_version": bwrap.bwrap_version(path) if path else None,
        "bwrap_setuid": bwrap.is_setuid(path) if path else None,
        "disable_userns_supported": bwrap.supports_disable_userns(path) if path else False,
        "max_user_namespaces": _read("/proc/sys/user/max_user_namespaces"),
        "unprivileged_userns_clone": _read("/proc/sys/kernel/unprivileged_userns_clone"),
        "apparmor_restrict_unprivileged_userns": _read(
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
        ),
        "running_as_root": os.geteuid() == 0,
        "sandbox_uid": ident.uid,
        "cgroups": _cgroups(),
        "limits_mode": limits.mode(),
        "prlimit_path": limits.prlimit_path(),
        # The one-exec chain (launcher.py); None: util-linux's tools start sandboxes.
        "launcher_path": (
            launcher.HELPER if launcher.prefix(SandboxPolicy(), ident) is not None else None
        ),
    }
    try:
        report["seccomp_filter_bytes"] = len(seccomp.bpf_program())
        report["seccomp_allow_list_bytes"] = len(seccomp.allow_list_program())
    except seccomp.FilterError as exc:
        report["seccomp_filter_error"] = str(exc)
    status = _inside_status()
    ok = "error" not in status
    report["sandbox_starts"] = ok
    if not ok:
        report["sandbox_error"] = status["error"]
    uid_inside = status.get("Uid", "0").split()
    caps = [status.get(k, "1") for k in ("CapEff", "CapPrm", "CapBnd")]
    report["in_force"] = {
        "user_namespace": ok,
        "uid_drop": ok and all(u != "0" for u in uid_inside),
        "no_capabilities": ok and all(int(c, 16) == 0 for c in caps),
        "seccomp": ok and status.get("Seccomp") == "2",
        "no_new_privs": ok and status.get("NoNewPrivs") == "1",
        "disable_userns": ok and report["disable_userns_supported"],
        "limits": report["limits_mode"],
        # bwrap as pid 1 of an outer pid namespace that dies with the spawner: no orphan
        # when the spawner dies during start-up (see runner). Made by agentd-launch, or
        # by the unshare variant a start here uses.
        "orphan_guard": ok
        and (report["launcher_path"] is not None or bool(orphan_guard_prefix(ident, dropping)[0])),
    }
    return report
