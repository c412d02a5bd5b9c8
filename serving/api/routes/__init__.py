"""Routers: `health` (liveness), `views` (the catalogue's views, merged per architecture), `quality`
(the Data Docs link and the suites' last results), `comparison` (the last Lambda vs Kappa
report), `metrics` (Prometheus) and `dashboard` (the live page at `/`, out of the OpenAPI
schema)."""
