"""What a program's words cost: their footprints, data hazards and the issue-path replay.

Owns: what each word does read from the words (`footprint`), RAW/WAR/WAW tracking over L2
regions and slots (`hazards`), the issue models (`issue`) and the timing replay (`replay`).
Every time it computes is a model estimate on a hardware profile. Imports `isa` and
`program` of `pccx_flow.board`.
"""
