"""Board programs: the pccx v002 ISA as data, program files, lowering and an emulator."""
