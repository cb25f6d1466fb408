"""`python -m agentd_sandbox`."""

import sys

from .cli import main

sys.exit(main())
