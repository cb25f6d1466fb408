"""The shim: a small supervisor per sandboxed run that owns its process, output and exit
status, so a background task outlives the daemon (`python -m agentd.shim`)."""
