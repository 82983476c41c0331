"""`python -m coffer_memory` runs the `coffer` command line."""

from ._cli import console

console()
