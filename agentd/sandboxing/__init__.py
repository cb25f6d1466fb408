"""Every rule agentd adds to a session's sandbox: the policy (identity, writable roots,
hidden paths), read-only runs, protected paths, inert git config."""
