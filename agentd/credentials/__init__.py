"""Credentials the sandbox can use but never hold: brokers outside the sandbox that add
a secret to the traffic of the hosts it belongs to (ssh_agent*: the ssh-agent)."""
