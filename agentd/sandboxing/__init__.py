"""Every rule agentd adds to a session's sandbox, and the SandboxMode a permission
decision builds it by. agentd_sandbox (sandbox/) turns a policy into bwrap, seccomp and
limits; what goes into that policy for a session is decided here:

| rule | file |
|---|---|
| who commands run as, writable roots, hidden paths, HOME, the session's temp dir | policy.py |
| what a run only the classifier allowed (read-only) may see and write | readonly.py |
| paths in a workspace that configure code which runs later: kept read-only | protected.py |
| the code-bearing files (git, editors, agents, package managers, shells) | codebearing.py, .toml |
| a repository's git config cut to inert keys for read-only runs | gitconfig.py |
| what all of a session's processes may use together (a control group) | groups.py |
| how a Bash call's sandbox is built, by why it was allowed | mode.py |
| the session's network: proxied, off or on | policy.py, agentd/network/ |
"""
