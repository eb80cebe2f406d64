"""The genz profile against GenZ 0.0.16's own numbers (tests/data/genz_ssm,
tests/data/genz_requirements, each with the command that made it):

1. Falcon-Mamba-7B on GenZ's H100 preset: prefill and decode latency and the
   recurrent state at contexts 1k-128k, batch 1 and 8 x 2 beams, tp 1 and 2;
2. platform requirements (GenZ's Sec. 7 closed forms) of the paper's models
   and use cases, bf16 and int8, with `jaxplat requirements --profile genz`'s
   function.

Prints each row with ours / GenZ's and the largest relative error.

    python experiments/genz_parity_ssm_requirements.py
"""

import csv
from pathlib import Path

import jaxplat as jp
from jaxplat.design import closed_forms
from jaxplat.model import genz_h100, replace, workload_from_dict
from jaxplat.report import table
from jaxplat.specs import units

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
GENZ = jp.Options(profile="genz")
MIB = 2.0**20


def rel(a, b):
    return abs(a / b - 1.0)


def falcon_mamba():
    m, hw = jp.load_model("falcon-mamba-7b"), genz_h100()
    rows, worst = [], 0.0
    for r in csv.DictReader(open(DATA / "genz_ssm" / "falcon_mamba_h100.csv")):
        wl = workload_from_dict(dict(batch=int(r["batch"]), beams=int(r["beams"]), prompt=int(r["prompt"]),
                                     output=int(r["output"])))
        met = jp.evaluate(m, hw, jp.Parallel(tp=float(r["tp"])), wl, GENZ)
        got = (float(met.ttft) * 1e3, float(met.tpot) * 1e3, float(met.kv_bytes) / MIB)
        want = (float(r["prefill_ms"]), float(r["decode_ms"]), float(r["decode_kv_mib"]))
        worst = max(worst, *(rel(g, w) for g, w in zip(got, want)))
        rows.append([r["batch"], r["beams"], r["tp"], r["prompt"]] + [f"{g:.6g} / {w:.6g}" for g, w in zip(got, want)])
    print("Falcon-Mamba-7B, GenZ H100 preset, bf16 (ours / GenZ 0.0.16)")
    print(table(["batch", "beams", "tp", "prompt", "prefill ms", "decode ms", "state MiB"], rows, "rrrrrrr"))
    print(f"largest relative error: {worst:.2g}\n")


def requirements():
    rows, worst, models = [], 0.0, {}
    for r in csv.DictReader(open(DATA / "genz_requirements" / "genz_requirements.csv")):
        m = models.setdefault(r["model"], jp.load_model(r["model"]))
        b = units.BYTES_PER_ELEMENT[r["dtype"]]
        wl = replace(jp.load_workload(r["workload"]), bytes_weight=b, bytes_act=b, bytes_kv=b,
                     compute_dtype=float(units.DTYPES.index(r["dtype"])))
        c = closed_forms(m, jp.Parallel(), wl, GENZ)
        keys = ("mem_bytes", "decode_mem_bw_bytes_s", "prefill_flops_s")
        scale = (1e9, 1e12, 1e12)
        errs = [rel(float(c[k]), float(r[k])) for k in keys]
        worst = max(worst, *errs)
        rows.append([r["model"], r["workload"], r["dtype"]]
                    + [f"{float(c[k]) / s:.5g} / {float(r[k]) / s:.5g}" for k, s in zip(keys, scale)]
                    + [f"{max(errs):.1g}"])
    print("Platform requirements, GenZ's closed forms (ours / GenZ 0.0.16)")
    print(table(["model", "use case", "dtype", "memory GB", "mem. bandwidth TB/s", "compute TFLOP/s", "rel. err"],
                rows, "lllrrrr"))
    print(f"largest relative error: {worst:.2g} (GenZ's GPT-3 has 50272 tokens to our 50257)")


if __name__ == "__main__":
    falcon_mamba()
    requirements()
