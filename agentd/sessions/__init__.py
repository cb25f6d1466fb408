"""Sessions and what they keep: the session, its event log, the SQLite store, retention,
the records of their /tmp directories, agent events."""
