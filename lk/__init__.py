"""The `lk` command line (CONTRACT §4): the composition root that wires the layers together."""
