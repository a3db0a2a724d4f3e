"""pccx-flow: one Gemma 3N decode step as a pccx v002 instruction DAG.

The stages are plain functions over plain data (see the README):
build the DAG (`pccx_flow.graph`), cost it on a hardware profile (`pccx_flow.hardware`),
schedule it onto lanes (`pccx_flow.schedule`), execute it numerically with Dask
(`pccx_flow.execute`) and check it against the independent reference decode
(`pccx_flow.reference`).
"""

__version__ = "0.1.0"

from pccx_flow.compiled import install_finder  # noqa: E402

install_finder()  # before any module of `pccx_flow.compiled.COMPILED` is imported
