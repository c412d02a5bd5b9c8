"""Routers: `health` (liveness), `views` (the five views, merged per architecture) and
`quality` (the Data Docs link and the suites' last results)."""
