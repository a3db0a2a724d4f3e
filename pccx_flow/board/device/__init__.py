"""Past the device boundary: talking to a pccx v002 NPU (or the fake one) over UIO.

Owns: the register map (`regmap`), the UIO window (`uio`), physically contiguous buffers
(`cma`), the DDR image bytes (`ddr_image`), DataMover commands (`transfers`), batch
dispatch (`dispatch`), one step end to end (`run_step`) or piece by piece (`session`), the
host's half of a step (`host_side`), L2 read-back (`readback`), golden checks
(`golden_check`), DataMover status words (`dm_status`), the bring-up ladder (`doctor`,
its rungs in `doctor_host`, `doctor_datamover`, `doctor_layer` over `doctor_bench`) and the
fake device (`fake_device`, whose NPU model `device_model` runs the emulator, whose batch
times `fake_timing` takes from the timing replay, and which `fake_bench` dresses as a whole
fake board with faults for `doctor`). Imports `isa`, `program`, `emulator` and `timing` of
`pccx_flow.board`.
"""
