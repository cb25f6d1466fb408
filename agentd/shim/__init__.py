"""`python -m agentd.shim FD`: the public entry point of the shims' forkserver. The shim
itself lives with the rest of a command's run, in agentd/runs/shim/."""
