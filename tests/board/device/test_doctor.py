"""The bring-up ladder on the fake board: each fault stops it at its rung with its diagnosis."""

from __future__ import annotations

import pytest

from pccx_flow.board.device import doctor
from pccx_flow.board.device.fake_bench import FAULTS, FakeBoard
from pccx_flow.board.device.regmap import board_registers
from pccx_flow.hardware.profile import load_profile


def climb(tmp_path, faults, weights=None, rungs=doctor.RUNGS):
    profile = load_profile("v002-as-built")
    regs = board_registers(profile)
    with FakeBoard(tmp_path / "board", regs, faults, answer_timeout=2.0) as board:
        bench = doctor.Bench(
            regs=regs, profile=profile, sysfs_root=board.sysfs_root, dev_root=board.dev_root,
            udmabuf_sysfs=board.udmabuf_sysfs, bus=board.device.bus, timeout=0.2,
            weights=weights, load_model=board.load_model,
        )  # fmt: skip
        return doctor.climb(bench, rungs)


# fault -> (rung it stops at, text in the evidence, text in the likely causes)
EXPECT = {
    "no-uio": (1, "found: uio0=fake-other-device", "bitstream is not loaded"),
    "no-udmabuf": (1, "udmabuf0: no ", "u-dma-buf module is not loaded"),
    "stuck-cmd-fifo": (2, "after reset hp3: FLAGS=0x06", "behind page hp3 takes no commands"),
    "never-done": (3, "DONE not seen within 0.2 s", "the core is stuck BUSY"),
    "dm-silent": (4, "hp0: no status word for 1 command(s)",
                  "MEMSET raised DONE (rung 3) but no DataMover emitted a status word"),
    "hp-interr": (4, "hp0: status 0: 0x11: tag 1, INTERR, not OKAY",
                  "INTERR: PG022 names a byte count of 0"),
    "extra-status": (4, "hp0: 3 status words for 1 command(s)",
                     "three words 0x80 for one command on HP0"),
    "acp-no-status": (5, "acp_in: no status word for 1 command(s)",
                      "the HP channels answer (rung 4) and ACP does not"),
    "l2-bad-bit": (6, "L2 word 0x900 (byte 0) came back", "a bad bit in that L2 bank"),
}  # fmt: skip


@pytest.mark.parametrize("fault", sorted(EXPECT))
def test_each_fault_stops_the_ladder_at_its_rung_with_its_diagnosis(tmp_path, fault):
    rung, evidence, cause = EXPECT[fault]
    assert FAULTS[fault][0] == rung  # the fake's own table agrees
    rungs = climb(tmp_path, [fault], rungs=doctor.RUNGS[:6])
    assert [r.number for r in rungs] == list(range(1, rung + 1))
    assert all(r.passed for r in rungs[:-1]) and not rungs[-1].passed
    last = rungs[-1]
    assert any(evidence in e for e in last.evidence), last.evidence
    assert any(cause in c for c in last.causes), last.causes
    assert last.next_step


def test_the_acp_diagnosis_says_how_to_check_snooping_without_touching_it(tmp_path):
    last = climb(tmp_path, ["acp-no-status"], rungs=doctor.RUNGS[:5])[-1]
    assert "CCI-400" in " ".join(last.causes)
    assert "check, do not write" in last.next_step
    assert "pccx-flow never touches them" in last.next_step


def test_a_healthy_fake_board_passes_every_rung(tmp_path, tiny_ckpt_dir):
    rungs = climb(tmp_path, [], weights=tiny_ckpt_dir)
    assert [(r.number, r.passed) for r in rungs] == [(n, True) for n in range(1, 8)]
    hp = rungs[3].evidence
    assert "hp3: 8 statuses 0x88 0x89 0x8a 0x8b 0x8c 0x8d 0x8e 0x8f: tags 8..15, OKAY" in hp
    assert "L2 matched the golden words after every batch" in rungs[6].evidence[-1]
    assert doctor.format_report(rungs).endswith("all 7 rungs passed")


def test_a_wrong_l2_value_in_layer_0_stops_at_rung_7_naming_the_instruction(
    tmp_path, tiny_ckpt_dir
):
    rungs = climb(tmp_path, ["corrupt"], weights=tiny_ckpt_dir)
    assert [r.passed for r in rungs] == [True] * 6 + [False]
    line = rungs[-1].evidence[-1]
    assert "first divergence at instruction" in line and "(node pre." in line
    report = doctor.format_report(rungs)
    assert report.endswith("stopped at rung 7 of 7 (6 passed)")
    assert "  next: run the growing prefixes one by one" in report


def test_fewer_statuses_than_commands_in_a_burst_is_named_with_the_probe_limit(tmp_path):
    class Short(FakeBoard):
        """HP2 answers at most one command per batch (a stream with no room for a burst)."""

        def _inject(self, regs):
            seen = []

            def answer(tag):
                seen.append(tag)
                return [0x80 | tag] if tag == 1 or len(seen) == 2 else []

            self.device.dm_answer("hp2", answer)

    profile = load_profile("v002-as-built")
    regs = board_registers(profile)
    with Short(tmp_path / "b", regs, []) as board:
        bench = doctor.Bench(regs=regs, profile=profile, sysfs_root=board.sysfs_root,
                             dev_root=board.dev_root, udmabuf_sysfs=board.udmabuf_sysfs,
                             bus=board.device.bus, timeout=0.2)  # fmt: skip
        last = doctor.climb(bench, doctor.RUNGS[:4])[-1]
    assert last.number == 4 and not last.passed
    assert "hp2: only 1 status words for 8 commands" in last.evidence
    assert any("a limit of this probe when the single command passed" in c for c in last.causes)
