"""The one stream engine: the log, micro-batch by micro-batch, into keyed state and real-time
views. The Lambda speed layer (`speed_layer`) and the Kappa job (`kappa`) each run it with
their own `StreamSpec`; neither holds a line of view logic."""
