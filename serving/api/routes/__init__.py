"""Routers: `health` (liveness), `views` (the five views, merged per architecture), `quality`
(the Data Docs link and the suites' last results) and `metrics` (Prometheus)."""
