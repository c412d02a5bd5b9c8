"""Serving layer: the HTTP API of CONTRACT §5, merging batch and real-time views per window."""
