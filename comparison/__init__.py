"""The side-by-side comparison: both architectures run one workload, measured and reported."""
