"""The library: Client and AsyncClient over gRPC, the request and result types, the
channel (unix socket, or TCP with TLS and a token), contexts, approvers and the error
tree. It imports nothing of the CLI, the terminal UI or the integrations."""
