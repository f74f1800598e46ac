"""`python -m bench.scale_cluster ...`: exit 1 when a phase recorded an error."""

import sys

from bench.scale_cluster.run import main

sys.exit(1 if main()["errors"] else 0)
