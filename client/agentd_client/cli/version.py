"""agentctl's version: the installed distribution's, read without importing anything else."""

from importlib import metadata


def version() -> str:
    for dist in ("agentd-client", "agentd"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"
