from tests.network.support import net_workspace, origin, proxied_daemon  # noqa: F401
