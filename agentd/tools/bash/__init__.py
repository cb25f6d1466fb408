"""The Bash tool: running a command (tool.py), its input channels, and its result text."""
