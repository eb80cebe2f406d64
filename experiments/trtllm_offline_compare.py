"""Max-load (offline) throughput vs TensorRT-LLM's published measurements.

Prints model, GPU, ISL/OSL, measured and predicted output tokens/s and their
ratio, for every row of data/measured/trtllm_offline_throughput.csv.
Not tuned to these numbers: the spec sheets' efficiencies, the engine's
documented settings (FP8 weights/KV, KV memory fraction 0.95 or 0.90) and
jaxplat's capacity and continuous-batching model (serving.max_load).

    .venv/bin/python experiments/trtllm_offline_compare.py
"""

import csv
import sys
from pathlib import Path

import jax
import numpy as np
from tqdm import tqdm

import jaxplat as jp
from jaxplat import serving
from jaxplat.model import workload_from_dict

DATA = Path(__file__).resolve().parents[1] / "data" / "measured" / "trtllm_offline_throughput.csv"
MODELS = {"llama-3.3-70b": "llama-3.1-70b", "llama-3.1-8b": "llama-3.1-8b"}  # same architecture


def main(path=DATA):
    rows = list(csv.DictReader(open(path)))
    out = []
    for r in tqdm(rows, desc="rows", file=sys.stderr):
        model, hw = jp.load_model(MODELS[r["model"]]), jp.load_hardware(r["gpu"])
        wl = workload_from_dict({"batch": 1, "prompt": int(r["isl"]), "output": int(r["osl"]), "dtype": r["dtype"]})
        par = jp.Parallel(tp=int(r["tp"]), pp=int(r["pp"]))
        srv = serving.serving(mem_fraction=0.95)
        b, thr = jax.device_get(serving.max_load_jit(model, hw, par, wl, srv, jp.Options()))
        meas = float(r["output_tok_s"])
        out.append((r["model"], f"{r['gpus']}x{r['gpu']}", f"{r['isl']}/{r['osl']}", meas, float(thr), float(b)))
    print(f"{'model':15s} {'GPUs':12s} {'ISL/OSL':>11s} {'measured':>10s} {'predicted':>10s} {'ratio':>6s} {'batch':>6s}")
    for m, g, lens, meas, pred, b in out:
        print(f"{m:15s} {g:12s} {lens:>11s} {meas:10.0f} {pred:10.0f} {pred / meas:6.2f} {b:6.0f}")
    ratios = np.array([p / m for *_, m, p, _ in out])
    print(f"\npredicted / measured: median {np.median(ratios):.2f}, geometric mean {np.exp(np.mean(np.log(ratios))):.2f}, "
          f"min {ratios.min():.2f}, max {ratios.max():.2f}; within 2x: {np.mean((ratios > 0.5) & (ratios < 2)):.0%}")


if __name__ == "__main__":
    main()
