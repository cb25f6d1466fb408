"""Bash output files: the bounded file itself, every session's outputs by id, and serving
them to many followers."""
