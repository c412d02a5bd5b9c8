"""The serving store (Postgres): where the layers publish views and the serving layer reads them.

It is the one contract between the writers (batch layer, speed layer, Kappa job) and the reader
(serving layer), so its schema lives in the shared core.
"""
