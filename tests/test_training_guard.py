"""The training step's error on the published dev runs stays what its docs
say (docs/training.md, experiments/training/README.md): every dev row of
data/measured/training_2026-12.csv that experiments/training/runs.py can
express is predicted again with `cost.training.train_step` as shipped, and
each source family's median |error| and median signed error (tokens/s per
chip, predicted / published - 1) must agree with the figures recorded here
within half a percentage point, with the same row counts. A change to the
cost model, the specs or the rows' mapping that moves a headline training
figure fails here until the docs and this record are updated. The held-out
test rows are not read (they are reported once per round, by
`validate.py --test`). Checked: with TrainWorkload's backward_efficiency at
0.775 instead of 0.80 four families move by 1-2 points (NeMo's median, among its
MoE rows, less) and the test fails.
About 20 s on 2 busy cores (one compiled call per row shape).
"""

import csv
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from helpers import import_script

ROOT = Path(__file__).resolve().parents[1]
TRAINING = ROOT / "experiments" / "training"
TOLERANCE = 0.5  # percentage points
# family: (rows, median |error| %, median signed error %), from `validate.py` at the commit that adds this
RECORDED = {
    "LLM Foundry": (216, 8.3, -6.1),
    "Megatron-Bridge/NeMo": (68, 6.8, 2.9),
    "Megatron-Core r0.8": (9, 2.9, -0.9),
    "Megatron-LM SC21": (22, 4.1, 1.8),
    "all": (315, 7.8, -1.6),
}


@pytest.fixture(scope="module")
def errors():
    runs_py = import_script(TRAINING, "runs")
    family, is_test, runs = runs_py.family, runs_py.is_test, runs_py.runs
    validate_py = import_script(TRAINING, "validate")
    predict = validate_py.predict
    out = defaultdict(list)
    for row, measured, inp in runs():
        if is_test(row) or isinstance(inp, str):
            continue
        err = 100.0 * (predict(inp)[0] / measured - 1.0)
        out[family(row["source"])].append(err)
        out["all"].append(err)
    return out


def test_dev_rows_keep_their_recorded_errors(errors):
    got = {fam: (len(e), float(np.median(np.abs(e))), float(np.median(e))) for fam, e in errors.items()}
    bad = [f"{fam}: rows {got.get(fam, (0,))[0]} vs {n}, |error| {got[fam][1]:.1f}% vs {a}%, signed "
           f"{got[fam][2]:+.1f}% vs {s:+}%" for fam, (n, a, s) in RECORDED.items()
           if fam not in got or got[fam][0] != n or abs(got[fam][1] - a) > TOLERANCE
           or abs(got[fam][2] - s) > TOLERANCE]
    assert set(got) == set(RECORDED), f"families changed: {sorted(got)}"
    assert not bad, "dev figures moved (update docs/training.md and this record):\n" + "\n".join(bad)


def test_nemo_2407_dimensions_give_the_summarys_own_model_flops():
    """The dimensions runs.py gives the NeMo 24.07 rows that print none (GPT3-5B/20B, Nemotron-8B/22B/340B,
    from NeMo's launcher configs) are the measured models': the summary prints model TFLOP/s per GPU beside
    tokens/s per GPU, and their ratio is NeMo's count of FLOPs per token, 6N (N without the input
    embedding) plus full, non-causal attention, 12·l·h·s. Worked from the Model runs.py builds, it must
    come within 0.2%: every row of the summary, those whose dimensions the CSV gives too, is within 0.1%
    (Nemotron-8B with a vocab of 51,200 would miss by 10%)."""
    runs_py = import_script(TRAINING, "runs")
    NEMO_2407_DIMS, family, model_for = runs_py.NEMO_2407_DIMS, runs_py.family, runs_py.model_for

    with open(ROOT / "data/measured/training_2026-12.csv") as f:
        rows = [r for r in csv.DictReader(f) if family(r["source"]) == "NeMo 24.07"]
    seen = set()
    for r in rows:
        if r["metric"] != "tokens_per_s_per_chip":
            continue
        tflops = next(float(t["value"]) for t in rows if t["metric"] == "tflops_per_chip" and t["model"] == r["model"]
                      and t["chips"] == r["chips"] and t["micro_batch"] == r["micro_batch"])
        m = model_for(r)
        L, h, f_, kv, hd, V = (float(x) for x in (m.layers, m.hidden, m.intermediate, m.kv_heads, m.head_dim, m.vocab))
        mlp = (3.0 if float(m.gated) else 2.0) * h * f_
        n = L * (2 * h * h + 2 * h * kv * hd + mlp) + V * h
        per_token = 6.0 * n + 12.0 * L * h * float(r["seq_len"])
        assert float(r["value"]) * per_token == pytest.approx(tflops * 1e12, rel=2e-3), r["model"]
        seen.add(r["model"])
    assert set(NEMO_2407_DIMS) <= seen


def test_a_pipelined_torchtitan_row_runs_pp_micro_batches_of_its_local_batch():
    """TorchTitan splits a rank's local batch into as many micro-batches as pipeline stages (its default;
    its tables set no other): Table 5's Llama-3.1-405B row (pp 8, dp 8, local batch 32, global 256) runs
    8 micro-batches of 4; a Table 6 row that omits the global batch (local 8, dp 2) gets 8 x 2 = 16, in
    micro-batches of 1. A row without pipelining, or of another source, keeps its columns."""
    runs_py = import_script(TRAINING, "runs")
    batches = runs_py.batches

    deg = lambda pp, dp: {"tp": 8, "pp": pp, "vp": 1, "cp": 1, "dp": dp, "ep": 1}  # noqa: E731
    tt = "TorchTitan Llama3.1 benchmarks 2024-12"
    assert batches({"source": tt, "global_batch_seqs": "256", "micro_batch": "32"}, deg(8, 8)) == (256.0, 4.0)
    assert batches({"source": tt, "global_batch_seqs": "", "micro_batch": "8"}, deg(8, 2)) == (16.0, 1.0)
    assert batches({"source": tt, "global_batch_seqs": "512", "micro_batch": "16"}, deg(1, 32)) == (512.0, 16.0)
    nemo = "NeMo 24.07 performance summary (H100 FP8)"
    assert batches({"source": nemo, "global_batch_seqs": "256", "micro_batch": "1"}, deg(8, 4)) == (256.0, 1.0)
    assert batches({"source": nemo, "global_batch_seqs": "", "micro_batch": "1"}, deg(8, 4)) == (None, 1.0)


def test_torchtitans_asynctp_benchmark_runs_its_configs_sequence_length():
    """The AsyncTP benchmark (2025-06) states no sequence length; its commands run llama3_8b.toml and
    llama3_70b.toml without overriding seq_len (8192), and its "async TP" rows overlap TP communication
    where its "vanilla TP" ones do not. A row that states its length keeps it; another source without
    one stays inexpressible."""
    runs_py = import_script(TRAINING, "runs")
    overlap, seq_len = runs_py.overlap, runs_py.seq_len

    bench = {"source": "TorchTitan AsyncTP benchmark 2025-06", "seq_len": "", "dtype": "bf16"}
    assert seq_len(bench) == 8192.0 and seq_len({**bench, "seq_len": "4096"}) == 4096.0
    assert seq_len({**bench, "source": "TorchTitan Llama3.1 benchmarks 2024-12"}) is None
    assert overlap({**bench, "notes": "async TP; torch.compile"}) == 1.0
    assert overlap({**bench, "notes": "vanilla TP; torch.compile"}) == 0.0


def test_fp8_recipes_are_read_as_the_tables_name_them():
    """MX blocks only where a row names MX: the Megatron-Bridge 25.09 table's primary FP8 on a B200 is
    per-tensor scaling, its alternate (the CSV's note: "MXFP8 32x32 on GB200/B200; 128x128 weights / 1x128
    activations blockwise on H100") MXFP8 on a B200 and 128-element blocks on an H100."""
    runs_py = import_script(TRAINING, "runs")
    recipe = runs_py.recipe

    primary = "FP8 (precision column absent in 25.09 table; primary = FP8 recipe)"
    alternate = "FP8 alt quantization granularity (MXFP8 32x32 on GB200/B200; 128x128 weights / 1x128 ...)"
    assert recipe(primary, "B200") == (1.0, "fp8", 0.0)
    assert recipe(alternate, "B200") == (1.0, "fp8", 32.0)
    assert recipe(alternate, "H100-SXM5-80GB") == (1.0, "fp8", 128.0)
    assert [recipe(d, "B200")[2] for d in ("FP8-CS", "FP8-MX", "MXFP8", "FP8")] == [0.0, 32.0, 32.0, 0.0]
    assert recipe("NVFP4", "B200") == (0.5 + 1.0 / 16.0, "fp4", 16.0)
    assert recipe("BF16", "B200") == (2.0, "bf16", 0.0)


def test_long_sequence_rows_read_both_ways_and_stay_out_of_the_figures():
    """NeMo's long-sequence tables give TFLOP/s per GPU only; runs.nemo_long_sequence_tokens turns them into
    tokens/s by NeMo's llama formula, l·h²·(12 + 12·g/a + 18·f/h + 12·s/h·c + 6·V/(l·h)) per token. By hand
    for Llama-2-7B at 1,048,576 tokens (l 32, h 4,096, f 11,008, a = g = 32, V 32,000; 536 TFLOP/s per GPU):
    1.6889e12 FLOP per token with the whole attention matrix (c = 1), 317.36 tokens/s; 8.6428e11 with the
    causal half (c = 1/2), 620.17 tokens/s. Which count the page used is not known, so runs() keeps them out."""
    runs_py = import_script(TRAINING, "runs")
    with open(ROOT / "data/measured/training_2026-12.csv") as f:
        rows = [r for r in csv.DictReader(f) if runs_py.family(r["source"]) == "NeMo long-sequence"]
    row = next(r for r in rows if r["seq_len"] == "1048576" and r["chip"].startswith("H100") and r["tp"])
    assert runs_py.nemo_long_sequence_tokens(row, causal=False) == pytest.approx(317.364, rel=1e-5)
    assert runs_py.nemo_long_sequence_tokens(row, causal=True) == pytest.approx(620.172, rel=1e-5)
    assert all(runs_py.measured_tokens(r) is None for r in rows)
