"""The daemon's parts every session's sandbox is built with, besides the session and
the config: its network namespaces and proxies, its ssh-agents, its control groups, its
temp dir mounts and the directory read-only runs stage their git configs in.

One is made by the assembly (agentd/daemon.py) and handed down: to the Services a tool
call gets, to the permission engine (its hooks run sandboxed), to whatever builds a
policy. Nothing looks one up: a part this daemon has not got is None, said so where it
is made, never found missing at run time.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentd.credentials.masks import CredentialMasks
from agentd.credentials.ssh_agent_service import SshAgentService
from agentd.fs.tmpfs import TmpMounts
from agentd.network.service import NetworkService
from agentd.sandboxing.groups import SessionGroups
from agentd.sandboxing.readonly import StagingDir


@dataclass(frozen=True, slots=True)
class SandboxRuntime:
    # Proxied sessions' namespaces and proxies; None: proxied sessions have no network.
    network: NetworkService | None
    # The sandbox's ssh-agent; None: `ssh_agent_hosts` is not set.
    ssh_agent: SshAgentService | None
    # Each session's control group; None: no groups (a policy built without a daemon).
    groups: SessionGroups | None
    # Sized tmpfs temp dirs; None: temp dirs stay plain directories.
    tmp_mounts: TmpMounts | None
    # Where read-only runs' sanitised git configs are staged.
    staging: StagingDir
    # sandbox.credentials: placeholders shown, denied secrets hidden; None: no entries.
    masks: CredentialMasks | None = None


def bare() -> SandboxRuntime:
    """A runtime with no daemon's services (no proxy, ssh-agent, groups or mounts), for
    tools, benches and tests that build a policy on their own."""
    return SandboxRuntime(None, None, None, None, StagingDir())
