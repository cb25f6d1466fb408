"""agentctl's commands: one module per command group, each function taking the client
(or none) and the parsed arguments and returning an exit code (core/errors.py)."""
