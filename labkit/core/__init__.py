"""The lab's ground: settings, errors, the corpus description, ranked hits and the lab context (no services)."""
