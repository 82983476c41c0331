"""The truth: the only code that reads and writes memory files."""
