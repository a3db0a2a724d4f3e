"""Timelines and trace files: pccx-lab's ``.pccx``, Chrome trace JSON, and their diff.

- `timeline`: `Timeline` / `Event`, plain data for anything that ran on lanes over cycles.
- `pccx_file`: `write_pccx` / `read_pccx`, pccx-lab's binary trace container.
- `diff`: `diff_timelines`, makespan, per-lane busy time and the first divergence.
"""
