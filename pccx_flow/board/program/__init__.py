"""Building a pccx v002 program from a scheduled decode step, and the program's files.

Owns: the lowering (`lower`, with its jobs in `addresses`, `batches`, `host_steps`, `words`
and `summary`), L2 and constant-slot allocation (`alloc`), the DDR image layout (`ddr`) and
the program container and its ``.prog``/``.memh``/``.json`` files (`files`, with the
sidecar's schema in `schema`). Imports `isa`
only of `pccx_flow.board`.
"""
