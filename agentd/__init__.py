"""agentd: runs the tool calls of AI coding agents, sandboxed, behind a gRPC API."""

import os

# The daemon forks sandboxes while gRPC threads run; gRPC's fork handlers then crash
# the child (SIGSEGV in event_engine). The child only execs, so it needs none of them.
# Must be set before grpc is first imported.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

__version__ = "0.1.0"
