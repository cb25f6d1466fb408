"""`python -m agentd.runs.shim FD`: the shims' forkserver, started once by the daemon."""

import sys

from agentd.runs.shim.forkserver import serve

serve(int(sys.argv[1]))
