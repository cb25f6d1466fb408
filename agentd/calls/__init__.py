"""One tool call's lifecycle, and batches of calls: validation, permission, the call,
results over budget spilled to a file."""
