"""Search: every configuration of the request's space that reaches the global batch exactly, ranked (search);
token budgets and epoch order (batching), planning for a scanned dataset (datafit, lengths), and what a plan
that does not fit should change (advice, nearest)."""
