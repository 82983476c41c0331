"""MCP server for coffer-memory (built by the Adapters issue)."""
