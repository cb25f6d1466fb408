"""File work as a session's identity, never through a link: opening beneath a root, the
acting identity, trees the sandbox wrote, the temp files of atomic writes."""
