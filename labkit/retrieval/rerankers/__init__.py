"""Re-rankers: steps that reorder the head of a fused ranking."""
