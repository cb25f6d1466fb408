from tests.credentials.ssh_world import ssh_world  # noqa: F401
from tests.network.support import net_workspace  # noqa: F401
