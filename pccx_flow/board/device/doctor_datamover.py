"""Rungs 4-6 of the bring-up ladder: the HP and ACP DataMovers, and an L2 round trip.

pccx's own steps 03-05 (``pccxai/v002-kv260-deploy-20260527`` ``debug/``:
``dbg_step_03_cmdsts_single_acp``, ``dbg_step_04_cmdsts_burst9``,
``dbg_step_05_hp_vs_acp_diff``) as functions of a `Bench`:
one command, then a burst, on each channel, every status word decoded and judged against
its command; the ACP channels by MEMCPY words, with the pattern read back; then a wide
pattern host->L2->host, a MEMSET that changes a copy's length, and a closing CVO.
"""

from __future__ import annotations

from pccx_flow.board.device import regmap
from pccx_flow.board.device.doctor_bench import (
    ACP_BURST,
    ACP_WORD,
    DONE_MARKER,
    PROBE_BYTES,
    SLOT,
    SWEEP_WORD,
    SWEEP_WORDS,
    Bench,
    Rung,
    collect,
    judge_words,
    kick,
    pattern,
    status_causes,
)
from pccx_flow.board.isa import L2_WORD_BYTES, encode, memcpy_length_fields
from pccx_flow.errors import BoardError

# --- rungs 4 and 5: the DataMover channels -----------------------------------------------


def _probe_hp(bench: Bench, page: str, count: int, r: Rung) -> list[str]:
    npu = bench.npu
    tags = [(count + k) & 0xF for k in range(count)]
    addr = bench.probe.phys
    commands = [regmap.encode_command(addr=addr, length_bytes=PROBE_BYTES, tag=t) for t in tags]
    for c in commands:
        npu.push_command(page, c)
    command = commands[0]
    level = npu.window.read32(npu.regs.page_register(page, "CMD_LVL"))
    r.evidence.append(
        f"{page}: {count} command(s) of {PROBE_BYTES} bytes at {addr:#x} pushed (the first"
        f" {command:#020x}), CMD_LVL={level}"
    )
    return _run_and_judge(npu, bench, page, [], count, tags, PROBE_BYTES, r)


def _run_and_judge(npu, bench: Bench, page: str, words: list[int], count: int, tags, nbytes: int,
                   r: Rung, label: str | None = None) -> list[str]:  # fmt: skip
    """Kick `words` and a DONE marker, then collect and judge `count` status words of
    `page`: the problems found (a kick that fails is one, named by `label` or the page)."""
    try:
        kick(npu, [*words, DONE_MARKER], bench.timeout)
    except BoardError as exc:
        return [f"{label or page}: {exc}"]
    return judge_words(page, collect(npu, page, count, bench.timeout), tags, nbytes, r)


def rung_hp(bench: Bench) -> Rung:
    """Each HP weight channel: one command, then a burst; every status word decoded."""
    r = Rung(4, "DataMover weight channels (HP)", False)
    pages = [p for p in bench.regs.pages if p.startswith("hp")]
    silent, problems = [], []
    for page in pages:
        for count in (1, regmap.FIFO_DEPTH):
            found = _probe_hp(bench, page, count, r)
            if found:
                problems += found
                if any("no status word" in p for p in found):
                    silent.append(page)
                break
    if not problems:
        r.passed = True
        return r
    r.evidence += problems
    if len(silent) == len(pages):
        r.causes = [
            "MEMSET raised DONE (rung 3) but no DataMover emitted a status word: the frontend"
            " is alive and the DataMovers are not (their clocks or resets, the helper pages'"
            " command/status streams not connected to them, or the PS-PL HP ports disabled)",
        ]
        r.next_step = (
            "check in the block design that each helper page's command and status streams"
            " reach its DataMover and that the S_AXI_HP ports are enabled; `dmesg` for AXI"
            " errors; reload the bitstream"
        )
    else:
        r.causes = status_causes(problems)
        r.next_step = (
            "compare the command word above with the DataMover's configuration"
            " (hw/vivado/system_bd.tcl in pccx's board repository); try an address inside the"
            " DDR image's weight area"
        )
        if all("status words for" in p for p in problems):
            r.next_step = (
                "reload the bitstream and repeat; if one command again gets several status"
                " words, look at the write enable of the helper page's status FIFO in the RTL"
            )
    return r


def _acp_batch(bench: Bench, to_host: bool, count: int, l2_word: int, host_off: int,
               r: Rung) -> list[str]:  # fmt: skip
    """`count` one-word MEMCPYs through ACP in (host->L2) or out (L2->host); statuses."""
    npu, probe = bench.npu, bench.probe
    page = "acp_out" if to_host else "acp_in"
    x, y, z = memcpy_length_fields(1)
    words = [encode("MEMSET", dest_cache="fmap_shape", slot=SLOT, a=x, b=y, c=z)]
    tags = [(0x8 + k) & 0xF for k in range(count)]
    for k, tag in enumerate(tags):
        addr = probe.phys + host_off + k * L2_WORD_BYTES
        npu.push_command(page, regmap.encode_command(addr=addr, length_bytes=L2_WORD_BYTES,
                                                     tag=tag))  # fmt: skip
        ends = ("npu", "host") if to_host else ("host", "npu")
        words.append(
            encode("MEMCPY", from_device=ends[0], to_device=ends[1],
                   dest=0 if to_host else l2_word + k, src=l2_word + k if to_host else 0,
                   aux=0, shape_ptr=SLOT)  # fmt: skip
        )
    r.evidence.append(f"{page}: {count} MEMCPY {'L2->host' if to_host else 'host->L2'}"
                      f" of one L2 word each from L2 word {l2_word:#x}")  # fmt: skip
    return _run_and_judge(npu, bench, page, words, count, tags, L2_WORD_BYTES, r)


def rung_acp(bench: Bench) -> Rung:
    """ACP in and out by MEMCPY words, one then a burst; the pattern must come back."""
    r = Rung(5, "DataMover feature-map channels (ACP) vs HP", False)
    probe = bench.probe
    problems: list[str] = []
    for count in (1, ACP_BURST):
        n = count * L2_WORD_BYTES
        sent = pattern(n, count)
        probe.view(0, n)[:] = sent
        probe.view(0x1000, n)[:] = bytes(n)
        problems += _acp_batch(bench, False, count, ACP_WORD, 0, r)
        if problems:
            break
        problems += _acp_batch(bench, True, count, ACP_WORD, 0x1000, r)
        if problems:
            break
        back = bytes(probe.view(0x1000, n))
        if back != sent:
            first = next(i for i in range(n) if back[i] != sent[i])
            problems.append(
                f"ACP round trip of {n} bytes: byte {first} came back {back[first]:#04x},"
                f" {sent[first]:#04x} was sent (statuses all OKAY)"
            )
            break
        r.evidence.append(f"{n} bytes host->L2->host through ACP came back equal")
    if not problems:
        r.passed = True
        return r
    r.evidence += problems
    no_status = any("no status word" in p or "DONE not seen" in p for p in problems)
    if no_status:
        r.causes = [
            "the HP channels answer (rung 4) and ACP does not: the ACP takes only 16-byte"
            " single-beat or 64-byte four-beat aligned INCR bursts with AxCACHE 0b0111,"
            " 0b1011 or 0b1111 (UG1085, ACP Limitations; Arm's Cortex-A53 TRM answers other"
            " AxCACHE values with SLVERR), so a DataMover issuing longer bursts needs a"
            " converter in front of the port",
            "cache-coherent snooping not enabled for the port: pccx's bring-up record saw"
            " exactly this (ACP silent, HP answering) and suspected the CCI-400 snoop control"
            " (its hypothesis H1, never confirmed); UG1085 puts S_AXI_ACP_FPD on the APU's"
            " snoop control unit, while CCI-400 snooping concerns the HPC/ACE ports",
        ]
        r.next_step = (
            "check, do not write: which PS port the ACP DataMover drives in the block design"
            " (S_AXI_ACP_FPD or S_AXI_HPC), its burst length and AxCACHE; whether the boot"
            " firmware enables snooping for that port (arm-trusted-firmware plat/xilinx/zynqmp"
            " cci_enable_snoop_dvm_reqs). The CCI-400 registers (0xFD6E0000) are secure-world:"
            " a user-space access raised SIGBUS on pccx's board, so read them from the boot"
            " firmware or a kernel module. pccx-flow never touches them"
        )
    elif any("came back" in p for p in problems):
        r.causes = [
            "statuses OKAY but other bytes came back: a coherency problem (the CPU's view of"
            " the buffer and the ACP's differ: a cached mapping without snooping), or the"
            " MEMCPY's L2 address read differently by the RTL"
        ]
        r.next_step = (
            "map the u-dma-buf devices uncached (O_SYNC, as pccx-flow does; u-dma-buf"
            " sync_mode) and repeat; check the ACP port's coherency settings as above"
        )
    else:
        r.causes = status_causes(problems)
        r.next_step = "compare the ACP DataMover's configuration with the command word"
    return r


# --- rung 6: L2 round trip ---------------------------------------------------------------


def rung_l2(bench: Bench) -> Rung:
    """A wide pattern host->L2->host, then a MEMSET that changes a copy's length, and a CVO."""
    r = Rung(6, "L2 round trip (MEMCPY, MEMSET, CVO)", False)
    npu, probe = bench.npu, bench.probe
    n = SWEEP_WORDS * L2_WORD_BYTES
    back_off, half_off = 0x8000, 0x10000
    sent = pattern(n, 3)
    probe.view(0, n)[:] = sent
    probe.view(back_off, n)[:] = b"\xa5" * n
    probe.view(half_off, n)[:] = b"\xa5" * n

    def memset(words: int) -> int:
        x, y, z = memcpy_length_fields(words)
        return encode("MEMSET", dest_cache="fmap_shape", slot=SLOT, a=x, b=y, c=z)

    def memcpy(to_host: bool) -> int:
        ends = ("npu", "host") if to_host else ("host", "npu")
        return encode("MEMCPY", from_device=ends[0], to_device=ends[1],
                      dest=0 if to_host else SWEEP_WORD, src=SWEEP_WORD if to_host else 0,
                      aux=0, shape_ptr=SLOT)  # fmt: skip

    steps = [  # (label, page, host offset, bytes, words)
        ("host->L2", "acp_in", 0, n, [memset(SWEEP_WORDS), memcpy(False)]),
        ("L2->host", "acp_out", back_off, n, [memcpy(True)]),
        ("L2->host after a MEMSET to half the length", "acp_out", half_off, n // 2,
         [memset(SWEEP_WORDS // 2), memcpy(True)]),
    ]  # fmt: skip
    problems: list[str] = []
    for k, (label, page, off, nbytes, words) in enumerate(steps):
        tag = 0xC + k
        command = regmap.encode_command(addr=probe.phys + off, length_bytes=nbytes, tag=tag)
        npu.push_command(page, command)
        problems += _run_and_judge(npu, bench, page, words, 1, [tag], nbytes, r, label)
        if problems:
            break
        r.evidence.append(f"{label}: {nbytes:,} bytes, DONE from the closing CVO")
    if not problems:
        back, half = bytes(probe.view(back_off, n)), bytes(probe.view(half_off, n))
        if back != sent:
            first = next(i for i in range(n) if back[i] != sent[i])
            word = SWEEP_WORD + first // L2_WORD_BYTES
            problems.append(
                f"L2 word {word:#x} (byte {first % L2_WORD_BYTES}) came back"
                f" {back[first]:#04x}, {sent[first]:#04x} was sent"
            )
            r.causes = [
                "an L2 word does not hold what was written (a bad bit in that L2 bank), or"
                " the copy's address arithmetic differs from the ISA's (word addresses,"
                " pccx-v002 mem_dispatcher.sv)"
            ]
            r.next_step = (
                "repeat with the bitstream reloaded; if the same word fails, run the RTL"
                " testbench of the L2 around it; if the offset drifts, compare MEMCPY's address"
                " fields with the RTL's"
            )
        elif half[: n // 2] != sent[: n // 2] or half[n // 2 :] != b"\xa5" * (n // 2):
            problems.append(
                f"the copy after the MEMSET to {n // 2:,} bytes moved another length: the"
                " MEMSET did not change the slot the MEMCPY read its length from"
            )
            r.causes = ["MEMSET writes a different constant slot than MEMCPY's shape_ptr reads"]
            r.next_step = "compare the MEMSET and MEMCPY field layouts with the RTL decoder's"
        else:
            r.evidence.append(
                f"{n:,} bytes came back equal through L2 words {SWEEP_WORD:#x}.."
                f"{SWEEP_WORD + SWEEP_WORDS - 1:#x}; after the MEMSET the copy moved exactly"
                f" {n // 2:,} bytes"
            )
            r.passed = True
            return r
    r.evidence += problems
    if not r.causes:
        r.causes = status_causes(problems)
        r.next_step = "see rungs 4 and 5: the same channels moved smaller copies"
    return r


