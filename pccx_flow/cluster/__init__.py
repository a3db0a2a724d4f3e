"""Dask meets the NPU: workers that own a device, decode steps as device tasks, many boards.

- `npu_worker`: the worker side. `NpuWorker` is a Dask worker plugin that owns one device
  (a board's UIO device or a fake one) and keeps the open step sessions; the module is also
  a worker preload (``dask worker ADDR --resources npu=1 --preload
  pccx_flow.cluster.npu_worker --npu fake``); its task functions run a step piece by piece
  or a whole program;
- `device_steps`: the generation backend of ``run --backend device``: per position the
  lowered program (cached per position and policy) becomes a chain of Dask tasks, a batch
  or a host step each, pinned to the worker that owns the device;
- `device_view`: what the lanes page shows of a step run on a device: the planned schedule
  beside the device's times, per lane, with the largest deviations named;
- `sweep`: independent programs spread over every device worker of a cluster, a worker or
  device lost on the way reported and its work run again elsewhere;
- `local`: in-process and local-process clusters of fake-device workers, on loopback.

Imports `pccx_flow.board` (the device room and what it stands on), `pccx_flow.dashboard`
and `pccx_flow.execute`; nothing imports this package but the command line.
"""

NPU_RESOURCE = "npu"
PLUGIN_NAME = "pccx-npu"
