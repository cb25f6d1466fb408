"""Credentials the sandbox can use but never hold.

The secret stays with the daemon. Over https: a sandbox reaches a configured upstream
through a route on its namespace's loopback (plain http), and the daemon forwards over
TLS with the credential added. `config` reads the sources and routes of the daemon's
config, `sources` fetches a secret, `paths` maps a route's request onto its upstream (or
refuses it), `relay` carries the HTTP, `push` reads a git push's ref updates, and
`service` decides, asks, journals and keeps what `agentctl credentials` shows. Over ssh:
`ssh_agent_*`, an ssh-agent socket in the sandbox that signs logins to configured hosts
with keys the daemon holds.
"""
