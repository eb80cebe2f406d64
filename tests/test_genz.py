"""The `genz` profile reproduces GenZ (tests/data/genz): per-operator tables
to 1e-6 (float32 gets within 7e-8 of GenZ's float64), end-to-end latencies
to the digits GenZ printed, and a case worked by hand from CONVENTIONS.md
that is not in that folder."""

import csv
from pathlib import Path

import pytest
from helpers import GiB, genz_system, workload

import jaxplat as jp

GENZ = Path(__file__).resolve().parent / "data" / "genz"
OPTS = jp.Options(profile="genz")
MIB = 2.0**20

# GenZ's rows in file order -> our row names.
DENSE_PREFILL = ["qkv", "logit", "attend", "out_proj", "up_gate", "down"]
DENSE_DECODE = ["qkv", "logit_prefix", "logit_suffix", "attend_prefix", "attend_suffix", "out_proj", "up_gate",
                "down"]
MOE_PREFILL = ["qkv", "logit", "attend", "out_proj", "router", "experts_up_gate", "experts_down"]
MOE_DECODE = ["qkv", "logit_prefix", "logit_suffix", "attend_prefix", "attend_suffix", "out_proj", "router",
              "experts_up_gate", "experts_down", None, None]


def llama2_7b():
    return jp.model.model_from_config(dict(num_hidden_layers=32, hidden_size=4096, num_attention_heads=32,
                                           intermediate_size=11008, vocab_size=32000))


def mixtral():
    return jp.model.model_from_config(dict(num_hidden_layers=32, hidden_size=4096, num_attention_heads=32,
                                           num_key_value_heads=8, intermediate_size=14336, vocab_size=32000,
                                           num_local_experts=8, num_experts_per_tok=2))


CASES = [
    ("llama2_7b_prefill_on_TPU", llama2_7b, (300, 1200), "prefill", DENSE_PREFILL),
    ("llama2_7b_decode_on_TPU", llama2_7b, (300, 1200), "decode", DENSE_DECODE),
    ("mixtral_8x7b_prefill_on_GH200", mixtral, (2000, 4900), "prefill", MOE_PREFILL),
    ("mixtral_8x7b_decode_on_GH200", mixtral, (2000, 4900), "decode", MOE_DECODE),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_genz_per_operator_tables(case):
    fname, model_fn, (tflops, bw), phase, names = case
    rows = list(csv.DictReader(open(GENZ / f"{fname}.csv")))
    assert len(rows) == len(names)
    bd = jp.breakdown(model_fn(), genz_system(tflops, bw, eff=0.8), jp.Parallel(),
                      workload(batch=1, prompt=1024, output=32), phase, OPTS)
    idx = {n: i for i, n in enumerate(bd["name"])}
    for row, name in zip(rows, names):
        if name is None:  # GenZ's zero-token "unused experts": no time, weights only
            assert float(row["Latency (msec)"]) == 0.0
            continue
        i = idx[name]
        pairs = [("Latency (msec)", bd["time"][i] * 1e3), ("Compute time (msec)", bd["compute_time"][i] * 1e3),
                 ("Memory time (msec)", bd["memory_time"][i] * 1e3), ("Num ops (MFLOP)", bd["flops"][i] / 1e6),
                 ("Input_a (MB)", bd["bytes_a"][i] / MIB), ("Input_w (MB)", bd["bytes_w"][i] / MIB),
                 ("Output (MB)", bd["bytes_o"][i] / MIB)]
        for col, ours in pairs:
            assert ours == pytest.approx(float(row[col]), rel=1e-6), (name, col)
    if names[-1] is None:  # the unused experts' weights are resident
        unused = sum(float(r["Input_w (MB)"]) for r in rows[-2:]) * MIB
        assert bd["count"][idx["idle_experts"]] == 32
        stored = jp.cost.build_table(model_fn(), jp.Parallel(), workload(batch=1, prompt=1024, output=32),
                                          "decode", OPTS).stored[idx["idle_experts"]]
        assert float(stored) == pytest.approx(unused, rel=1e-6)


H100_GENZ = dict(tflops=989, mem_gbs=3400, link_gbs=450, link_us=1.0, mem_gb=80)


@pytest.mark.parametrize("model,tp,prefill_ms,decode_ms", [
    ("llama-2-7b", 1, 116.07, 5.095),
    ("llama-3.1-70b", 8, 234.02, 8.011),
])
def test_genz_end_to_end(model, tp, prefill_ms, decode_ms):
    # GenZ 0.0.16, H100_GPU preset (tests/data/genz/README.md): batch 8, 1024 in, 256 out, bf16.
    # Equal to the digits printed there: within half a unit of the last one.
    m = jp.evaluate(jp.load_model(model), genz_system(**H100_GENZ), jp.Parallel(tp=tp),
                    workload(batch=8, prompt=1024, output=256), OPTS)
    assert float(m.ttft) * 1e3 == pytest.approx(prefill_ms, abs=0.005)
    assert float(m.tpot) * 1e3 == pytest.approx(decode_ms, abs=0.0005)
    assert float(m.throughput) == pytest.approx(8 / float(m.tpot), rel=1e-6)  # GenZ: batch / decode latency


def test_genz_decode_by_hand_beams_int8():
    """GenZ's decode latency for Llama-2-7B, batch 4 x 2 beams, int8, worked
    from CONVENTIONS.md with plain arithmetic (not in data/genz)."""
    F, W, WON = 400e12, 2000 * GiB, 18000 * GiB
    b, beams, P, O = 4, 2, 1000, 200
    B, D, H, Dq, Df, V, L = b * beams, 4096, 32, 128, 11008, 32000, 32
    bpe, mult = 1.0, 0.5  # int8: 1 byte, twice the bf16 peak

    def op(macs, off, on):  # elements off-chip and on-chip
        return max(2 * macs * mult / F, (off * bpe) / W + (on * bpe) / WON)

    layer = (op(B * 3 * H * Dq * D, 3 * H * Dq * D, B * D + B * 3 * H * Dq)     # QKV
             + op(b * H * P * Dq, b * H * P * Dq, b * H * Dq + b * H * P)      # logit prefix
             + op(B * H * O * Dq, B * H * O * Dq, B * H * Dq + B * H * O)      # logit suffix
             + op(b * H * P * Dq, b * H * P * Dq, b * H * P + b * H * Dq)      # attend prefix
             + op(B * H * O * Dq, B * H * O * Dq, B * H * O + B * H * Dq)      # attend suffix
             + op(B * D * D, D * D, 2 * B * D)                                  # out proj
             + op(B * D * 2 * Df, 2 * Df * D, B * D + B * 2 * Df)              # up + gate
             + op(B * Df * D, Df * D, B * Df + B * D))                          # down
    head = op(B * D * V, D * V + B * D + B * V, 0)
    expected = L * layer + head
    hw = jp.model.hardware_from_dict({
        "flops": {"bf16": F / 2},  # GenZ runs int8 at twice its one (bf16) peak
        "memory": [{"name": "sram", "size": 1e18, "bandwidth": WON}, {"name": "hbm", "size": 1e12, "bandwidth": W}],
        "network": [{"domain": 8, "bandwidth": 1e11, "latency": 1e-6}], "tdp_w": 700})
    wl = workload(batch=b, beams=beams, prompt=P, output=O, dtype="int8")
    m = jp.evaluate(llama2_7b(), hw, jp.Parallel(), wl, OPTS)
    assert float(m.tpot) == pytest.approx(expected, rel=1e-4)
    # Summary numbers: KV for prompt once per sequence plus every beam's output.
    assert float(m.kv_bytes) == pytest.approx(L * 2 * (b * H * P + B * H * O) * Dq * bpe, rel=1e-6)
