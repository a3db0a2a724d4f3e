"""From a scheduled decode step to a pccx v002 program, and running that program.

Five rooms, each importing only the rooms above it in this list (`tests/test_layout.py`
keeps it so):

- `isa`: what a word is and how each target reads it (field tables, the spec and as-built
  targets with their RTL evidence, BF16, byte layouts). Imports nothing else of `board`.
- `program`: building a program from a schedule (lowering, L2 allocation, the DDR layout)
  and its files (``.prog``, ``.memh``, ``.json``). Imports `isa`.
- `emulator`: running a program's words on an emulated board, the oracle checks against
  the reference decode, golden vectors and bring-up prefixes. Imports `isa`, `program`.
- `timing`: what a program's words cost under the issue models (footprints, hazards,
  replay). Imports `isa`, `program`.
- `device`: everything past the device boundary: the register map, UIO, CMA buffers,
  DataMover commands, dispatch, the host's half of a step, L2 read-back, a step run piece
  by piece (`session`) and the fake device (whose model is the emulator, and whose batch
  times are the timing replay's). Imports `isa`, `program`, `emulator`, `timing`.
"""
