"""What everything else stands on: config, errors, logs, metrics, the service manager's
notify protocol, the daemon's private directories. Imports nothing else of agentd."""
