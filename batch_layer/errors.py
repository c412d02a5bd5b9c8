"""How a batch run fails, or finds nothing to do: one-line reasons the CLI prints as they are."""


class BatchError(RuntimeError):
    """A batch run cannot go on (nothing archived, a cutoff that would lose events...)."""


class NothingNewError(BatchError):
    """A batch run has nothing new to compute: nothing archived yet, no valid event yet, or
    (`pipeline.compute_views`) a version that would equal the published one. A caller that
    must produce a version (`lk batch`, `lk drain`) reports it as an error; a DAG's step skips."""
