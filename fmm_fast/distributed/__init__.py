"""Scale-out on Ray: evaluate, explain and masf sharded by example across actors (`--workers`,
`--ray-address`).

runtime: start or join a Ray runtime (the only module that imports ray first); worker: the actor, one
exported model and its own MaskBatchEngine; pool: feeds tasks to idle actors and keeps their accounts;
sharding: length-balanced chunks; evaluation, explanation, signals: the drivers of the three commands.
Nothing here is imported unless one of the flags is given, so fmm-fast works without the `ray` extra.
"""
