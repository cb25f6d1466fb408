"""A session's way out: its own network namespace, a proxy the daemon owns inside it,
and the rules by name that decide every connection (docs/guides/network.md)."""
