"""`python -m runner`: the engine's command line."""

import sys

from runner.cli import main

sys.exit(main())
