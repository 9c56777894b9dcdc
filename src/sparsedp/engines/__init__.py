"""sparsedp.engines."""
