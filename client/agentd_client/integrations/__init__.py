"""agentd for other programs: the anthropic SDK's tools, an MCP server, agentctl agent's
conversation, and installing agentd into Claude Code and Codex."""
