"""``python -m coffer_memory._cli`` (``python -m coffer_memory`` is the documented spelling)."""

import sys

from . import main

sys.exit(main())
