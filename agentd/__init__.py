"""agentd: runs the tool calls of AI coding agents, sandboxed, behind a gRPC API."""

__version__ = "0.1.0"
