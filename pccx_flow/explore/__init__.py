"""Design sweeps of the pccx v002 decode step: what it takes to reach a target tok/s.

`sweep` parses a sweep (TOML or ``--set``) and samples its points; `params` says what each
parameter changes and costs; `step` reshapes the decode step (stored sizes, sparse W_down,
speculative verify); `point` schedules and bounds one point; `cache` keeps its record on
disk; `run` evaluates many on Dask; `analysis`, `report` and `plots` turn records into the
Pareto front, the smallest-changes table and context curves. Every tok/s is a model
estimate on the profile it names.
"""
