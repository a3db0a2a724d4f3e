// pccx-flow's own testbench (not pccx RTL): stream BF16 words through CVO_sfu_unit and
// print each result, to check pccx_flow.board.emulator.sfu_rtl against the RTL.
`timescale 1ns / 1ps
import isa_pkg::*;
module tb_sfu;
  logic clk = 0, rst_n = 0, clear = 0;
  cvo_func_e func;
  logic [15:0] length;
  cvo_flags_t flags;
  logic [15:0] din;
  logic valid;
  logic ready;
  logic [15:0] dout;
  logic dvalid;
  CVO_sfu_unit dut(.clk(clk), .rst_n(rst_n), .i_clear(clear), .IN_func(func), .IN_length(length),
                   .IN_flags(flags), .IN_data(din), .IN_valid(valid), .OUT_data_ready(ready),
                   .OUT_result(dout), .OUT_result_valid(dvalid));
  always #5 clk = ~clk;
  logic [15:0] mem [0:262143];
  int n, f, fl, gap, len;
  always @(posedge clk) if (dvalid) $display("R %04h", dout);
  initial begin
    if (!$value$plusargs("N=%d", n)) n = 0;
    if (!$value$plusargs("F=%d", f)) f = 0;
    if (!$value$plusargs("FLAGS=%d", fl)) fl = 0;
    if (!$value$plusargs("GAP=%d", gap)) gap = 0;
    if (!$value$plusargs("LEN=%d", len)) len = n;
    $readmemh("in.memh", mem);
    func = cvo_func_e'(f); length = 16'(len); flags = cvo_flags_t'(fl); valid = 0; din = 0;
    repeat (3) @(posedge clk);
    rst_n = 1;
    repeat (2) @(posedge clk);
    for (int i = 0; i < n; i++) begin
      din <= mem[i]; valid <= 1;
      @(posedge clk);
      if (gap > 0) begin valid <= 0; repeat (gap) @(posedge clk); end
    end
    valid <= 0;
    repeat (40) @(posedge clk);
    $finish;
  end
endmodule
