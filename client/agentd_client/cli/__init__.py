"""agentctl: the parser and what happens around a command (main.py), how a command
names its session (names.py), and one module per command group (commands/)."""
