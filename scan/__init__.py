"""Dataset scanning (issue 19, first part): token lengths of a training set, streamed, without the GPU or
the planner's core. `planner scan` is its face."""
