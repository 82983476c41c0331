"""REST adapter for coffer-memory (built by the Adapters issue)."""
