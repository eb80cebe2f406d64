"""GenZ Case Study IV (arXiv 2406.01698): NPU array shape and attention offload.

Llama-3-8B prefill (batch 1) on an NPU of 65,536 MACs at 1 GHz, as one
256x256 systolic array, four 128x128 cores or sixteen 64x64 cores
(specs/hardware/npu-case-study-iv.yaml), with attention (logit, softmax,
attend) on the NPU or offloaded to an 8 TOPS CPU over a 128 GB/s PCIe link.
Each GEMM's compute time is its SCALE-Sim cycle count (jaxplat.cost.microarch,
weight stationary) over the clock; memory, vector unit and link come from the
same cost model (`jaxplat.evaluate`, `jaxplat.breakdown`).

Prints the per-operator array utilization (useful MACs over the PE-cycles a
GEMM occupies: the breakdown's FLOPs over compute time x array peak) and the
TTFT of each design at several prompt lengths, and writes a figure.

    .venv/bin/python experiments/paper/npu_case_study.py [--prompts 128 512 2048 8192] [--out PNG]
"""

import argparse
import time

import numpy as np

import jaxplat as jp
from jaxplat.report import table

DESIGNS = (("1 x 256x256", 256, 256, 1), ("4 x 128x128", 128, 128, 4), ("16 x 64x64", 64, 64, 16))
ATTENTION = ("logit", "softmax", "attend")  # the rows offloaded to the CPU
OPS = ("qkv", "logit", "attend", "out_proj", "up_gate", "down", "lm_head")


def design(hw, rows, cols, cores, offload):
    return jp.replace(hw, array_rows=rows, array_cols=cols, cores=cores, offload=ATTENTION if offload else ())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.1-8b", help="Llama-3-8B's architecture (the 3.1 spec: same dims)")
    ap.add_argument("--hardware", default="npu-case-study-iv")
    ap.add_argument("--prompts", type=int, nargs="+", default=[128, 512, 2048, 8192])
    ap.add_argument("--detail", type=int, default=2048, help="prompt length of the per-operator table")
    ap.add_argument("--out", default="experiments/paper/npu_case_study.png")
    a = ap.parse_args()
    t_start = time.time()
    model, base = jp.load_model(a.model), jp.load_hardware(a.hardware)
    wl0 = jp.replace(jp.load_workload("chatbot"), batch=1.0, beams=1.0, output=1.0)
    par = jp.Parallel()
    peak = 2.0 * float(base.chip.array_rows * base.chip.array_cols * base.chip.cores * base.chip.clock_hz)

    ttft, util = {}, {}
    for label, r, c, n in DESIGNS:
        for off in (False, True):
            hw = design(base, r, c, n, off)
            for p in a.prompts:
                wl = jp.replace(wl0, prompt=float(p))
                ttft[label, off, p] = float(jp.evaluate(model, hw, par, wl).ttft)
                b = jp.breakdown(model, hw, par, wl, "prefill")
                flops = np.array(b["flops"]) * np.array(b["count"])
                util[label, off, p, "all"] = flops.sum() / (ttft[label, off, p] * peak)
                for op in OPS:
                    i = b["name"].index(op)
                    on_cpu = off and op in ATTENTION
                    util[label, off, p, op] = (np.nan if on_cpu or b["compute_time"][i] == 0
                                               else b["flops"][i] / (b["compute_time"][i] * peak))

    print(f"{a.model} prefill, batch 1, on {a.hardware} designs (65,536 MACs at 1 GHz, "
          f"{peak / 1e12:.0f} TFLOP/s peak, weight stationary)")
    print(f"\nArray utilization per operator at a {a.detail}-token prompt, % (useful MACs / PE-cycles; "
          "'cpu' = offloaded), and of the whole prefill (FLOPs / (TTFT x peak)):")
    rows = []
    for label, *_ in DESIGNS:
        for off in (False, True):
            cells = [("cpu" if np.isnan(v) else f"{100 * v:.1f}") for v in
                     (util[label, off, a.detail, op] for op in OPS)]
            rows.append([label, "CPU" if off else "NPU"] + cells + [f"{100 * util[label, off, a.detail, 'all']:.1f}"])
    print(table(["design", "attention on"] + list(OPS) + ["prefill"], rows, "ll" + "r" * (len(OPS) + 1)))

    print("\nArray utilization of the whole prefill by prompt length, % (FLOPs / (TTFT x peak)); in brackets, "
          "of qkv alone (weight stationary: 2 x rows + cols fill and drain cycles per fold of `prompt` rows):")
    rows = []
    for label, *_ in DESIGNS:
        for off in (False, True):
            rows.append([label, "CPU" if off else "NPU"] + [
                f"{100 * util[label, off, p, 'all']:.1f} ({100 * util[label, off, p, 'qkv']:.1f})" for p in a.prompts])
    print(table(["design", "attention on"] + [f"{p} tok" for p in a.prompts], rows, "ll" + "r" * len(a.prompts)))

    print("\nTTFT, ms:")
    rows = []
    for label, *_ in DESIGNS:
        for off in (False, True):
            rows.append([label, "CPU" if off else "NPU"] + [f"{1e3 * ttft[label, off, p]:.2f}" for p in a.prompts])
    print(table(["design", "attention on"] + [f"{p} tok" for p in a.prompts], rows, "ll" + "r" * len(a.prompts)))
    best = {p: min((ttft[d[0], off, p], d[0], off) for d in DESIGNS for off in (False, True)) for p in a.prompts}
    for p, (t, lab, off) in best.items():
        print(f"  fastest at {p} tokens: {lab}, attention on {'CPU' if off else 'NPU'} ({1e3 * t:.2f} ms)")

    plot(a, ttft, util)
    print(f"\nwrote {a.out} ({time.time() - t_start:.0f} s)")


def plot(a, ttft, util):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    colors = ("tab:blue", "tab:orange", "tab:green")
    for (label, *_), col in zip(DESIGNS, colors):
        for off, style in ((False, "-o"), (True, "--s")):
            left.plot(a.prompts, [1e3 * ttft[label, off, p] for p in a.prompts], style, color=col,
                      label=f"{label}, attention on {'CPU' if off else 'NPU'}")
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xlabel("prompt length (tokens)")
    left.set_ylabel("TTFT (ms)")
    left.set_title("Llama-3-8B prefill TTFT, 65,536 MACs")
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8)

    width = 0.27
    x = np.arange(len(OPS))
    for j, ((label, *_), col) in enumerate(zip(DESIGNS, colors)):
        vals = [100 * util[label, False, a.detail, op] for op in OPS]
        right.bar(x + (j - 1) * width, vals, width, color=col, label=label)
    right.set_xticks(x, OPS)
    right.set_ylabel("array utilization (%)")
    right.set_ylim(0, 105)
    right.set_title(f"per-operator utilization, {a.detail}-token prompt, attention on the NPU")
    right.legend(fontsize=8)
    right.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
