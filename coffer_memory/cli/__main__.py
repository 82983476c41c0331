"""``python -m coffer_memory.cli``."""

import sys

from . import main

sys.exit(main())
