"""The gRPC face: the server and its listeners, request decoding, the service (each RPC
bound to its handler in handlers/), and the protobuf forms of the daemon's data."""
