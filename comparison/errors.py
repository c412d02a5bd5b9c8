"""The comparison's one error: what went wrong, in one line for `lk: error: <reason>`."""


class ComparisonError(RuntimeError):
    """A comparison could not go on (a component failed, a wait ran out)."""
