"""The measured rows as data/measured/convert.py writes them: trtllm-bench's
own batch cap and iteration budget (worked by hand from its source), and the
shipped CSVs equal to what the script writes from the source tables."""

import csv
import importlib.util
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "measured"


def _convert():
    spec = importlib.util.spec_from_file_location("convert", DATA / "convert.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("isl, osl, want", [
    # Llama-3.1-8B FP8 on one H200 (141 GiB), tensorrt_llm/bench/build/tuning.py:
    # engine 8,029,995,008 B = 7.4785 GiB, KV room 0.95 x 133.52 = 126.85 GiB,
    # 2 x 32 layers x 8 KV heads x 128 x 1 B = 65,536 B per token.
    (128, 128, (4096, 8192)),     # 8,118 requests, capped at 4096; 4096 x 2 tokens
    (128, 2048, (1024, 2048)),    # 955.1 requests -> 128 x 8; 1,014.8 tokens -> the 2048 floor
    (20000, 2000, (96, 20096)),   # 94.47 -> 32 x 3; budget grows to the prompt + a full batch
])
def test_trtllm_bench_settings_by_hand(isl, osl, want):
    assert _convert().trtllm_bench_settings("llama-3.1-8b", "h200-sxm", "fp8", 1, 1, isl, osl) == want


def test_shipped_rows_are_what_convert_writes():
    conv = _convert()
    rows = list(conv.trtllm_table(DATA / "trtllm_offline_throughput.csv"))
    held = list(conv.trtllm_table(DATA / "trtllm_perf_overview_heldout.csv", source="trtllm-perf-overview-heldout"))
    held += list(conv.trtllm_table(DATA / "trtllm_perf_overview_moe.csv", source="trtllm-perf-overview-moe"))
    held += list(conv.static_batch_table(DATA / "trtllm_v0.9_static_batch.csv"))
    for name, want, whole in (("calibration_rows.csv", rows, False), ("heldout_rows.csv", held, True)):
        shipped = list(csv.DictReader(open(DATA / name)))
        got = [{k: str(v) for k, v in r.items()} for r in want]
        assert got == (shipped if whole else shipped[:len(got)]), name
    # the static-batch page: per-GPU tokens/s times tp, milliseconds to seconds
    static = {(r["model"], r["hardware"], r["batch"], r["prompt"], r["metric"]): r for r in held
              if r["source"] == "trtllm-v0.9-static"}
    assert float(static[("llama-2-70b", "h100-sxm", 1024, 128, "throughput_tok_s")]["value"]) == 2 * 3214
    assert float(static[("llama-2-70b", "a100-80gb", 1, 2048, "ttft_s")]["value"]) == 0.2492


def test_moe_gather_column(tmp_path):
    # The attention-DP rows carry moe_gather 1 (Parallel.moe_gather); any
    # other value than 0 or 1 is one line naming the file, row and column.
    from jaxplat.design.measured import read_rows
    from jaxplat.specs import SpecError
    lines = open(DATA / "heldout_rows.csv").read().splitlines()
    header = lines[0].split(",")
    qwen = next(line for line in lines if line.startswith("qwen3-235b-a22b"))
    assert read_rows(DATA / "heldout_rows.csv")[lines[1:].index(qwen)].par["moe_gather"] == 1.0
    bad = qwen.split(",")
    bad[header.index("moe_gather")] = "2"
    path = tmp_path / "rows.csv"
    path.write_text(lines[0] + "\n" + ",".join(bad) + "\n")
    with pytest.raises(SpecError) as e:
        read_rows(path)
    assert str(e.value) == f"{path}: row 2: column moe_gather: 0 (all-to-all) or 1 (all-gather), got '2'"


def test_a_row_on_a_named_stack_runs_as_estimate_runs_it():
    """row_hardware(row, software=STACK) is the chip `estimate --engine STACK` loads: the stack's fixed costs
    (graph-captured: 2 us per kernel, 2 ms per step), the shipped calibration's fractions beneath them; without
    it the row runs the calibration's own fitted stack (16.8 us, 57 us). heldout_check --engine reported the
    fitted costs under the default stack's name before this was so."""
    import jaxplat as jp
    from jaxplat.design.measured import read_rows, row_hardware

    root = Path(__file__).resolve().parents[1]
    row = next(r for r in read_rows(root / "data/measured/heldout_rows.csv") if r.hardware == "b200")
    est, run = jp.load_hardware("b200"), row_hardware(row, software="graph-captured")
    own = row_hardware(row)
    for hw, kernel, step in ((run, 2e-6, 2e-3), (own, 1.68444e-05, 5.71452e-05)):
        assert float(hw.software.kernel_latency) == pytest.approx(kernel)
        assert float(hw.software.iteration_overhead) == pytest.approx(step)
        assert float(hw.efficiency.compute) == pytest.approx(float(est.efficiency.compute))
    for f in ("kernel_latency", "iteration_overhead", "collective_latency", "sequence_overhead"):
        assert float(getattr(run.software, f)) == pytest.approx(float(getattr(est.software, f))), f
