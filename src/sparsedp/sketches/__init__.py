"""sparsedp.sketches."""
