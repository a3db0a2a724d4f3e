"""The testbench pccx-flow writes around the controller: an AXI-Lite driver and a uop monitor.

Nothing in it comes from pccx-v002; it instantiates the checkout's `npu_controller_top`
with the ports `pccx_flow.cosim.ports` found (inputs it does not know, such as the deployed
build's ``IN_enc_stat``/``IN_enc_valid``, tied to zero) and:

- drives writes from a stimulus file (``+STIM=``: one line per write, ``cycle address
  data``, hex address and data): it waits until that cycle, then runs an AXI4-Lite write
  (address, then data, as `AXIL_CMD_IN` accepts them one after the other; signals change
  on the falling edge, handshakes are seen on the rising one), and logs ``W n cycle``
  when the data beat is taken;
- logs every decoded uop as ``D cycle opcode body`` (the cycle a decoder valid output is
  high; the opcode from which valid it is, the 60-bit body from ``OUT_op_x64``);
- runs ``+DRAIN=`` more cycles after the last write and ends with ``E cycle``.

One clock for everything (the core clock; on the board AXI-Lite runs on its own clock):
cycles are core cycles from reset's release.
"""

from __future__ import annotations

from pccx_flow.cosim.ports import TOP, VALIDS, Port

TB_TOP = "pccx_flow_cosim_tb"
KNOWN_INPUTS = {"clk": "clk", "rst_n": "rst_n", "i_clear": "1'b0"}


def bench_text(ports: list[Port]) -> str:
    """The testbench's SystemVerilog for a controller with `ports`."""
    pins = []
    for p in ports:
        if p.direction == "IFACE":
            pins.append(f".{p.name}(axil.slave)")
        elif p.name in KNOWN_INPUTS:
            pins.append(f".{p.name}({KNOWN_INPUTS[p.name]})")
        elif p.name in VALIDS:
            pins.append(f".{p.name}(valid[{VALIDS[p.name]}])")
        elif p.name == "OUT_op_x64":
            pins.append(".OUT_op_x64(op)")
        elif p.direction == "INPUT":
            pins.append(f".{p.name}('0)")  # an input this harness does not drive
    connections = ",\n    ".join(pins)
    monitor = "\n".join(
        f"      if (valid[{k}]) $fwrite(fo, \"D %0d {k} %015h\\n\", cycle, op);"
        for k in sorted(VALIDS.values())
    )
    return f"""// written by pccx-flow (cosim); drives the checkout's {TOP}, copies none of it
`timescale 1ns / 1ps
import isa_pkg::*;

module {TB_TOP};
  logic clk = 1'b0;
  logic rst_n = 1'b0;
  always #1 clk = ~clk;
  longint cycle = 0;
  always @(posedge clk) if (rst_n) cycle <= cycle + 1;

  axil_if #(.ADDR_W(12), .DATA_W(64)) axil (.clk(clk), .rst_n(rst_n));
  logic [4:0] valid;
  instruction_op_x64_t op;

  {TOP} u_dut (
    {connections}
  );

  integer fo, fi, drain;
  longint at;
  logic [63:0] addr, data;
  string stim, out;

  logic aw_done = 1'b0, w_done = 1'b0;
  integer writes = 0;
  always @(posedge clk) begin
    aw_done <= axil.awvalid && axil.awready;
    w_done <= axil.wvalid && axil.wready;
    if (rst_n) begin
      if (axil.wvalid && axil.wready) begin
        $fwrite(fo, "W %0d %0d\\n", writes, cycle);
        writes <= writes + 1;
      end
{monitor}
    end
  end

  initial begin
    if (!$value$plusargs("STIM=%s", stim) || !$value$plusargs("OUT=%s", out)) begin
      $display("pccx-flow cosim: give +STIM=file +OUT=file");
      $finish;
    end
    if (!$value$plusargs("DRAIN=%d", drain)) drain = 64;
    fi = $fopen(stim, "r");
    fo = $fopen(out, "w");
    axil.awvalid = 1'b0; axil.wvalid = 1'b0; axil.bready = 1'b1;
    axil.arvalid = 1'b0; axil.rready = 1'b1; axil.awprot = '0; axil.arprot = '0;
    axil.araddr = '0; axil.wstrb = '1;
    repeat (4) @(posedge clk);
    rst_n = 1'b1;
    // signals change on the falling edge; a handshake is seen on the rising edge
    while ($fscanf(fi, "%d %h %h\\n", at, addr, data) == 3) begin
      while (cycle < at) @(posedge clk);
      @(negedge clk);
      axil.awaddr = addr[11:0];
      axil.awvalid = 1'b1;
      do @(negedge clk); while (!aw_done);
      axil.awvalid = 1'b0;
      axil.wdata = data;
      axil.wvalid = 1'b1;
      do @(negedge clk); while (!w_done);
      axil.wvalid = 1'b0;
    end
    repeat (drain) @(posedge clk);
    $fwrite(fo, "E %0d\\n", cycle);
    $fclose(fo);
    $finish;
  end
endmodule
"""
