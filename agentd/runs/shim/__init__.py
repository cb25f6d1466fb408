"""The shim: a small supervisor per sandboxed run that owns its process, output and exit
status, so a background task outlives the daemon. supervisor.py is the shim itself
(started through its public entry point, `python -m agentd.runs.shim`), client.py the
daemon's side of it, adopt.py the taking over of tasks a previous daemon left."""
