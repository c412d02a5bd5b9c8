"""Kappa: the stream engine as the only path. Versioned output (`kappa.job`), and reprocessing
by replay of the retained log into a new version, then an atomic switch (`kappa.reprocess`)."""
