"""Measuring: ranking metrics, evaluation and tuning of search modes, significance, tool choice, scale."""
