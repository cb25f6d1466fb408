"""The sandbox's environment in proxied mode: the usual clients pointed at the proxy
the daemon listens with inside the session's namespace, without being told."""

from __future__ import annotations

import os

# Fixed ports: every session has a namespace, and so a port space, of its own.
HTTP_PORT = 3128
SOCKS_PORT = 1080
PROXY_HOST = "127.0.0.1"
# Where the ssh ProxyCommand helper is shown read-only inside the sandbox.
SSH_PROXY_MOUNT = "/run/agentd-net/ssh-proxy"
SSH_PROXY_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ssh-proxy")


def ssh_proxy_script() -> bytes:
    """The helper's text, which the sandbox is given by content (SandboxPolicy.ro_files),
    never bound from here: this file lies in the daemon's checkout or venv, wherever
    that is (a home only its owner may enter), and bwrap runs as the sandbox identity."""
    with open(SSH_PROXY_SOURCE, "rb") as f:
        return f.read()


def proxy_environment(http_port: int = HTTP_PORT, socks_port: int = SOCKS_PORT) -> dict[str, str]:
    """Variables for curl, wget, pip, npm/yarn/pnpm, cargo, go and ssh-via-git."""
    http = f"http://{PROXY_HOST}:{http_port}"
    socks = f"socks5h://{PROXY_HOST}:{socks_port}"
    env: dict[str, str] = {}
    for name, value in (
        ("HTTP_PROXY", http),
        ("HTTPS_PROXY", http),
        ("ALL_PROXY", socks),
        # Empty: nothing bypasses the proxy (there is no other way out anyway).
        ("NO_PROXY", ""),
    ):
        env[name] = value
        env[name.lower()] = value
    env.update(
        {
            "npm_config_proxy": http,
            "npm_config_https_proxy": http,
            "npm_config_noproxy": "",
            "YARN_HTTP_PROXY": http,
            "YARN_HTTPS_PROXY": http,
            "PIP_PROXY": http,
            "CARGO_HTTP_PROXY": http,
            "AGENTD_HTTP_PROXY_PORT": str(http_port),
            # Through bash: an installed package's data file may have lost its exec bit.
            "GIT_SSH_COMMAND": f"ssh -o ProxyCommand='/bin/bash {SSH_PROXY_MOUNT} %h %p'",
        }
    )
    add_git_config(env, [("http.proxy", http), ("https.proxy", http)])
    return env


def add_git_config(env: dict[str, str], pairs: list[tuple[str, str]]) -> None:
    """Append git settings to `env` as GIT_CONFIG_KEY_n/VALUE_n after any already there
    (git applies them in order: a later one of a single-valued key wins)."""
    try:
        count = int(env.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        count = 0
    for key, value in pairs:
        env[f"GIT_CONFIG_KEY_{count}"] = key
        env[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    env["GIT_CONFIG_COUNT"] = str(count)


def merge(env: dict[str, str], extra: dict[str, str]) -> None:
    """`extra` added to `env`: its GIT_CONFIG_KEY_n/VALUE_n appended after env's own,
    NO_PROXY lists joined; any other variable set."""
    try:
        count = int(extra.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        count = 0
    add_git_config(
        env,
        [
            (extra[f"GIT_CONFIG_KEY_{i}"], extra.get(f"GIT_CONFIG_VALUE_{i}", ""))
            for i in range(count)
        ],
    )
    for name, value in extra.items():
        if name.startswith("GIT_CONFIG_"):
            continue
        if name in ("NO_PROXY", "no_proxy", "npm_config_noproxy") and env.get(name):
            value = ",".join(dict.fromkeys([*env[name].split(","), *value.split(",")]))
        env[name] = value
