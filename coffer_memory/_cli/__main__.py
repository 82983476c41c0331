"""``python -m coffer_memory._cli`` (``python -m coffer_memory`` is the documented spelling)."""

from . import console

console()
