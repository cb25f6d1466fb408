"""The `agentd` commands other than `serve`, which talk to a running daemon or its files."""
