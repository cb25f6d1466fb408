"""What the file tools share: the read state, refusing devices, structured patches."""
