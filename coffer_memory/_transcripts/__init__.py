"""Past agent sessions: read-only readers, listing, scrubbing and distillation into the journal."""
