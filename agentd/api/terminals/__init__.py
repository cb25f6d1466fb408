"""A task's terminal bytes off gRPC: one-time tokens (tokens.py) for a unix socket beside
the API socket (server.py), each connection one task's terminal (channel.py)."""
