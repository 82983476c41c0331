"""Import and export: a home's stores to a zip or JSONL file and back, and memory from other tools.

Sources, one module each: a coffer export (``archive``), Claude Code's memory (``claude_code``),
agents' instruction files (``rules_files``), the MCP reference memory server's knowledge graph
(``mcp_memory``) and a basic-memory folder (``basic_memory``). The export is written by
``export``, within the limits ``archive`` reads. Every write goes through the Writer's
transaction (``apply``); ``Porting`` (``svc.porting``) ties them together.
"""

from .models import EXPORT_FORMATS, IMPORT_KINDS, ExportReport, ImportEntry, ImportReport
from .service import Porting

__all__ = ["EXPORT_FORMATS", "IMPORT_KINDS", "ExportReport", "ImportEntry", "ImportReport", "Porting"]
