"""The shim: a small supervisor per sandboxed run that owns its process, output and exit
status, so a background task outlives the daemon. supervisor.py is the shim itself,
forked by forkserver.py (started through its public entry point, `python -m
agentd.runs.shim`); protocol.py what the two sides say; spawn.py starts a run under a
shim, client.py is the daemon's side of a running one, adopt.py the taking over of
tasks a previous daemon left."""
