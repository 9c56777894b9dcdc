"""sparsedp.mechanisms."""
