"""Routers: `health` (liveness) and `views` (the five views, merged per architecture)."""
