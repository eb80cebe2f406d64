"""Reproduce GenZ's reference outputs (tests/data/genz) with the genz profile.

Prints, per GenZ table, the largest relative error over every operator's
latency, compute time, memory time, FLOPs and bytes, then the end-to-end
latencies of GenZ 0.0.16's H100 preset.

    python experiments/genz_parity.py
"""

import csv
from pathlib import Path

import jaxplat as jp
from jaxplat.model import genz_h100, genz_system, model_from_config, workload_from_dict
from jaxplat.report import table

GENZ = Path(__file__).resolve().parents[1] / "tests" / "data" / "genz"
OPTS = jp.Options(profile="genz")
MIB = 2.0**20
LLAMA2_7B = dict(num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, intermediate_size=11008,
                 vocab_size=32000)
MIXTRAL = dict(LLAMA2_7B, num_key_value_heads=8, intermediate_size=14336, num_local_experts=8, num_experts_per_tok=2)
ROWS = {  # GenZ's rows in file order -> our row names (None: its zero-time unused-expert rows)
    ("dense", "prefill"): ["qkv", "logit", "attend", "out_proj", "up_gate", "down"],
    ("dense", "decode"): ["qkv", "logit_prefix", "logit_suffix", "attend_prefix", "attend_suffix", "out_proj",
                          "up_gate", "down"],
    ("moe", "prefill"): ["qkv", "logit", "attend", "out_proj", "router", "experts_up_gate", "experts_down"],
    ("moe", "decode"): ["qkv", "logit_prefix", "logit_suffix", "attend_prefix", "attend_suffix", "out_proj",
                        "router", "experts_up_gate", "experts_down", None, None],
}
COLUMNS = {"Latency (msec)": ("time", 1e3), "Compute time (msec)": ("compute_time", 1e3),
           "Memory time (msec)": ("memory_time", 1e3), "Num ops (MFLOP)": ("flops", 1e-6),
           "Input_a (MB)": ("bytes_a", 1 / MIB), "Input_w (MB)": ("bytes_w", 1 / MIB), "Output (MB)": ("bytes_o", 1 / MIB)}


def table_error(fname, cfg, kind, system, phase):
    rows = list(csv.DictReader(open(GENZ / f"{fname}.csv")))
    bd = jp.breakdown(model_from_config(cfg), system, jp.Parallel(),
                      workload_from_dict(dict(batch=1, prompt=1024, output=32)), phase, OPTS)
    idx = {n: i for i, n in enumerate(bd["name"])}
    worst = 0.0
    for row, name in zip(rows, ROWS[(kind, phase)]):
        if name is None:
            continue
        for col, (key, scale) in COLUMNS.items():
            ref = float(row[col])
            worst = max(worst, abs(bd[key][idx[name]] * scale - ref) / abs(ref) if ref else 0.0)
    return len(rows), worst


def main():
    tpu = genz_system(300, 1200, compute_efficiency=0.8, memory_efficiency=0.8)
    gh200 = genz_system(2000, 4900, compute_efficiency=0.8, memory_efficiency=0.8)
    out = []
    for fname, cfg, kind, system in (("llama2_7b_prefill_on_TPU", LLAMA2_7B, "dense", tpu),
                                     ("llama2_7b_decode_on_TPU", LLAMA2_7B, "dense", tpu),
                                     ("mixtral_8x7b_prefill_on_GH200", MIXTRAL, "moe", gh200),
                                     ("mixtral_8x7b_decode_on_GH200", MIXTRAL, "moe", gh200)):
        n, err = table_error(fname, cfg, kind, system, "prefill" if "prefill" in fname else "decode")
        out.append([fname, n, f"{err:.2e}"])
    print(table(["GenZ table", "operators", "max rel. error"], out))
    print()
    wl = workload_from_dict(dict(batch=8, prompt=1024, output=256))
    rows = []
    for model, tp, pre, dec in (("llama-2-7b", 1, 116.07, 5.095), ("llama-3.1-70b", 8, 234.02, 8.011)):
        m = jp.evaluate(jp.load_model(model), genz_h100(), jp.Parallel(tp=tp), wl, OPTS)
        rows.append([f"{model} tp={tp} prefill", f"{pre:.2f} ms", f"{float(m.ttft) * 1e3:.2f} ms",
                     f"{float(m.ttft) * 1e3 / pre - 1:+.1e}"])
        rows.append([f"{model} tp={tp} decode", f"{dec:.3f} ms", f"{float(m.tpot) * 1e3:.3f} ms",
                     f"{float(m.tpot) * 1e3 / dec - 1:+.1e}"])
    print(table(["GenZ 0.0.16, H100, batch 8, 1024/256", "GenZ", "jaxplat genz", "rel. error"], rows))


if __name__ == "__main__":
    main()
