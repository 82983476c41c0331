"""The derived index (apsw + FTS5 trigram): always rebuildable from the files."""
