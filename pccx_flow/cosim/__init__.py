"""Co-simulation: a program's words driven through the user's pccx-v002 controller RTL.

Owns: the checkout's file set and the Verilator it is built with (`rtl_files`), the module
ports read from Verilator's JSON (`ports`), the SystemVerilog testbench pccx-flow writes
(`harness`: an AXI-Lite driver and a uop monitor; no RTL is copied), the host's writes
taken from the replay's timeline (`stimulus`), the build cache and the simulation run
(`simulate`), and the comparison with the program's own decode and the replay
(`compare`).

Imports `pccx_flow.board` (the ISA, programs, the replay) and `pccx_flow.traces`; only the
command line imports it.
"""
