"""Every rule agentd adds to a session's sandbox: the policy (identity, writable roots,
hidden paths, HOME), read-only runs, protected paths, inert git config, and the
SandboxMode a permission decision builds it by."""
