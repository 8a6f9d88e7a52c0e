"""The lab's ground: settings, errors, the corpus description and the corpora, ranked hits and the lab context (no services)."""
