"""The gRPC face: the server and its listeners, request decoding, the servicer, and the
protobuf forms of the daemon's data."""
