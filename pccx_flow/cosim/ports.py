"""The controller's ports as this checkout has them, read from Verilator's JSON tree.

Checkouts drift: the deployed build's `npu_controller_top` has ``IN_enc_stat`` and
``IN_enc_valid`` inputs the public one lacks, and older schedulers had other valid outputs.
So the testbench is written from the ports the checkout really has: a probe module (ours)
instantiates `npu_controller_top` with only its AXI-Lite interface connected, Verilator
writes its parsed tree as JSON (``--json-only``; the other pins are only PINMISSING
warnings there), and `ports_from_tree` reads the module's port list from it. Verilator
cannot make a model whose top has an interface port, which is why the probe exists.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pccx_flow.errors import InputError

TOP = "npu_controller_top"
PROBE_TOP = "pccx_flow_probe"
# what the testbench must find: clock, reset, the AXI-Lite slave and the decoder's outputs
REQUIRED = ("clk", "rst_n", "S_AXIL_CTRL", "OUT_op_x64")
VALIDS = {  # decoder valid output -> opcode (isa_pkg.sv OP_GEMV .. OP_CVO)
    "OUT_GEMV_op_x64_valid": 0,
    "OUT_GEMM_op_x64_valid": 1,
    "OUT_memcpy_op_x64_valid": 2,
    "OUT_memset_op_x64_valid": 3,
    "OUT_cvo_op_x64_valid": 4,
}

PROBE = f"""// written by pccx-flow (cosim port discovery); not part of pccx-v002
module {PROBE_TOP} (input logic clk, input logic rst_n);
  axil_if #(.ADDR_W(12), .DATA_W(64)) axil (.clk(clk), .rst_n(rst_n));
  {TOP} u_dut (.S_AXIL_CTRL(axil.slave));
endmodule
"""


@dataclass(frozen=True)
class Port:
    name: str
    direction: str  # INPUT, OUTPUT, INOUT, or IFACE for an interface port
    dtype: str


def ports_from_tree(tree: dict, module: str = TOP) -> list[Port]:
    """The ports of `module` in a Verilator ``--json-only`` tree, in declaration order."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(reversed(node))
            continue
        if not isinstance(node, dict):
            continue
        if node.get("type") == "MODULE" and node.get("name") == module:
            out = []
            for s in node.get("stmtsp") or []:
                if s.get("type") != "VAR":
                    continue
                if s.get("varType") == "IFACEREF":
                    out.append(Port(s["name"], "IFACE", str(s.get("dtypeName") or "")))
                elif s.get("direction") not in (None, "NONE"):
                    out.append(Port(s["name"], s["direction"], str(s.get("dtypeName") or "")))
            return out
        stack.extend(v for v in node.values() if isinstance(v, dict | list))
    raise InputError(f"Verilator's tree has no module {module}; is this a pccx-v002 checkout?")


def check_ports(ports: list[Port]) -> None:
    """One line naming a port the testbench needs and this checkout lacks."""
    names = {p.name for p in ports}
    for name in (*REQUIRED, *VALIDS):
        if name not in names:
            raise InputError(
                f"{TOP} in this checkout has no port {name}; the cosim harness drives "
                f"{', '.join(REQUIRED)} and monitors {', '.join(VALIDS)}"
            )


def discover_ports(verilator: str, files: list[Path], includes: list[Path], work: Path,
                   flags: tuple[str, ...]) -> list[Port]:  # fmt: skip
    """Run the probe through ``verilator --json-only`` in `work`; the top's ports."""
    work.mkdir(parents=True, exist_ok=True)
    probe = work / "probe.sv"
    probe.write_text(PROBE, encoding="utf-8")
    argv = [verilator, "--json-only", *flags, "--top-module", PROBE_TOP, "--Mdir", str(work),
            *(f"-I{d}" for d in includes), *map(str, files), str(probe)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    tree_file = work / f"V{PROBE_TOP}.tree.json"
    if done.returncode != 0 or not tree_file.is_file():
        lines = done.stderr.strip().splitlines() or ["no output"]
        first = next((ln for ln in lines if ln.startswith("%Error")), lines[-1])
        raise InputError(f"Verilator could not parse the controller: {first}")
    ports = ports_from_tree(json.loads(tree_file.read_text(encoding="utf-8")))
    check_ports(ports)
    return ports
