"""gemv kernels (filled in from the graph's kernel table)."""

KERNELS: dict = {}
