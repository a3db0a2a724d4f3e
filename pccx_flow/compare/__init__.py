"""Scheduler comparison: policies x instances (decode steps, random families, user DAGs).

`families` makes seeded random DAGs, `instances` names every instance of a sweep and builds
its problem, `run` schedules one instance with every policy (and the exact solver where it
can), `sweep` runs many in parallel with Dask and journals them, `summary` and `plots` turn
the records into tables and pictures. `pccx-flow compare` is the command line for all of it.
"""
