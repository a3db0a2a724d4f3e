"""Running a program's words on an emulated board, and checking them against the oracle.

Owns: the functional emulator (`emulate`, its L2 model in `l2`), host-step kernels as the
host runs them (`host_kernels`), the comparison with the reference decode (`check`), the
emulator as a generation backend (`backend`), per-instruction golden vectors (`golden`) and
bring-up prefixes (`bisect`). Imports `isa` and `program` of `pccx_flow.board`.
"""
