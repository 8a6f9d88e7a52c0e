"""Talking to models: embeddings, one chat call, whether the configured models are there."""
