"""What the integrations default to, apart so agentctl's help can name it without
loading the agent loop."""

# The model `agentctl agent` and the agent loop use unless told otherwise: a current one;
# the installed SDK's table says when a model retires (agent.retirement()), and
# tests/e2e/test_agentctl_agent.py fails once it lists this one.
DEFAULT_MODEL = "claude-sonnet-5-5"
