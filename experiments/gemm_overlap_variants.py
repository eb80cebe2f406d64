"""The weight GEMMs' overlap of streams and math (Options.gemm_overlap), a
modelling variant judged on validation rows only (not shipped: the default is
the roofline's max).

A GEMM near its ridge point (compute and memory times alike: a decode step of
a few hundred sequences on an H100, ~250 rows) cannot keep its tensor cores
and its HBM stream both busy all the time; the roofline's max assumes it
does. gemm_overlap = p joins the two as a p-norm (2^(1/p) x the max at the
ridge, within 4% of it at p = 3 where one is twice the other; 0 keeps the
max). No kernel fit row sits near the ridge (DeepGEMM's fit rows are M = 64,
weight streaming, and M = 4096, compute-bound), so p is a choice among
variants. Each variant first re-solves the kernel pins by their procedures on
the kernel fit rows (`memory` on M = 64, then `compute` with `tile_latency` on
M = 4096, then `attention_compute`), then is crossed with `network` at the
shipped 0.356 and at NCCL's large-message 0.819, and judged on:
  * DeepGEMM's M = 128 dense rows (kernel validation rows: compute about half
    the memory time) and its masked grouped rows;
  * the 224 TensorRT-LLM rows of experiments/heldout_check.py on `estimate`'s
    default stack (graph-captured): the 1.0 pages' dense and MoE rows at
    offline max load, with the dense rows' medians where a request is mostly
    prompt (ISL share > 0.85) and mostly output (< 0.35), and v0.9's static
    batches (throughput and batch-1 TTFT);
  * the per-chip throughput ratios between chips on that page.
The declared validation rows (experiments/calibration_check.py --calibration
FILE, the shipped file with a variant's pins) and the training dev rows are
judged apart (docs/calibration_history.md, "The weight GEMMs at their ridge").

    .venv/bin/python experiments/gemm_overlap_variants.py [--network 0.356,0.819] [--exponents 0,4,3,2]

(about 15 minutes on 2 cores: each variant re-solves its pins and compiles the rows' programs once)
"""

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

import kernel_check  # noqa: E402
import kernel_pins  # noqa: E402
from heldout_check import DATA, moe_models  # noqa: E402

from jaxplat import load_hardware, replace  # noqa: E402
from jaxplat.design import calibration as cal  # noqa: E402
from jaxplat.design.measured import chip_ratio_errors, read_rows  # noqa: E402
from jaxplat.model import EFFICIENCY_PARAMS  # noqa: E402
from jaxplat.report import table  # noqa: E402
from jaxplat.specs import SpecError  # noqa: E402

EXPONENTS = (0.0, 4.0, 3.0, 2.0)
NETWORKS = (0.355996, 0.819)
NAMES = ("network", "memory", "compute", "tile_latency", "attention_compute")
KERNEL_ROWS = kernel_check.kernel_rows()


def options(p):
    """`Options.gemm_overlap` = p where the kernel rows are predicted (kernel_check.KERNEL_OPTS) and
    where engines are (calibration.OPTS)."""
    return (dataclasses.replace(kernel_check.KERNEL_OPTS, gemm_overlap=p),
            dataclasses.replace(cal.OPTS, gemm_overlap=p))


def repinned(p):
    """{name: value} of the variant gemm_overlap = p: `memory` re-solved on DeepGEMM's M = 64 fit rows
    (kernel_check.implied_memory), then `compute` with `tile_latency` on its M = 4096 fit rows
    (kernel_pins.implied_tile) and `attention_compute` at that compute on FlashAttention-3's BF16 rows at
    S = 16k (kernel_pins.implied_attention; attention rows take no GEMM norm): the procedures that set them,
    in the order they were set."""
    kopts, _ = options(p)
    hw = load_hardware("h100-sxm")
    memory = kernel_check.implied_memory(hw, kopts)
    hw = replace(hw, eff_memory=memory)
    compute, tile, *_ = kernel_pins.implied_tile(hw, kopts)
    attention = kernel_pins.implied_attention(replace(hw, tile_latency=tile), compute)
    return {"memory": memory, "compute": compute, "tile_latency": tile, "attention_compute": attention}


def kernel_rows(p, values):
    """(M=128 dense, masked grouped) DeepGEMM validation rows' (median |error|, median signed) at `values`."""
    hw = replace(load_hardware("h100-sxm"), **{EFFICIENCY_PARAMS[n][0]: v for n, v in values.items()})
    items = [(label, pr / me - 1.0) for role, label, pr, me in kernel_check.deepgemm(KERNEL_ROWS, hw, options(p)[0])
             if role == "validation" and label.startswith("tflops")]  # its GB/s rows are the same times
    dense = [e for label, e in items if "grp" not in label]
    grouped = [e for label, e in items if "grp" in label]
    return tuple((float(np.median(np.abs(e))), float(np.median(e))) for e in map(np.array, (dense, grouped)))


def main(networks=NETWORKS, exponents=EXPONENTS):
    rows = read_rows(DATA)
    measured = np.array([r.value for r in rows])
    page = np.array([r.source.startswith("trtllm-perf-overview") for r in rows])
    moe = moe_models(rows)
    dense = page & ~np.array([moe[r.model] for r in rows])
    prompt_heavy = dense & np.array([r.prompt / (r.prompt + r.output) > 0.85 for r in rows])
    decode_heavy = dense & np.array([r.prompt / (r.prompt + r.output) < 0.35 for r in rows])
    out, pins = [], []
    for p in exponents:
        pinned = repinned(p)
        pins.append(["max" if p == 0 else f"{p:g}", f"{pinned['memory']:.3f}", f"{pinned['compute']:.2f}",
                     f"{pinned['tile_latency'] * 1e6:.1f} us", f"{pinned['attention_compute']:.3f}"])
        # one compile per variant (the option is static), then each network value runs it
        pred = cal.Predictor(rows, NAMES, software="graph-captured", options=options(p)[1])
        for net in networks:
            values = {**pinned, "network": net}
            q = np.asarray(pred.predict(cal.z_of(pred, values)), float)
            e = q / measured - 1.0
            ratios = np.abs([x.error for x in chip_ratio_errors(q, rows, source="trtllm-perf-overview")])
            (kd, ks), (gd, gs) = kernel_rows(p, values)
            out.append([f"{net:.3f}", "max" if p == 0 else f"{p:g}",
                        f"{100 * np.median(np.abs(e)):.1f}% / {100 * np.median(e):+.1f}%",
                        *(f"{100 * np.median(np.abs(e[x])):.1f}%" for x in (dense, page & ~dense, ~page)),
                        f"{np.median(q[prompt_heavy] / measured[prompt_heavy]):.2f}",
                        f"{np.median(q[decode_heavy] / measured[decode_heavy]):.2f}",
                        f"{100 * np.median(ratios):.1f}%",
                        f"{100 * kd:.1f}% / {100 * ks:+.1f}%", f"{100 * gd:.1f}% / {100 * gs:+.1f}%"])
    print("Each variant's kernel pins, re-solved by their procedures on the kernel fit rows")
    print(table(["gemm_overlap", "memory", "compute", "tile_latency", "attention_compute"], pins, "lrrrr"))
    print()
    print("Variants, validation rows only (default stack graph-captured; the shipped calibration with these values)")
    print(table(["network", "gemm_overlap", f"all {len(rows)}", f"1.0 dense {dense.sum()}",
                 f"1.0 MoE {(page & ~dense).sum()}", f"v0.9 static {(~page).sum()}",
                 "dense prompt-heavy", "dense decode-heavy", "chip ratios", "DeepGEMM M=128",
                 "DeepGEMM masked grouped"], out, "llrrrrrrrrr"))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    floats = lambda text: tuple(float(x) for x in text.split(","))  # noqa: E731
    ap.add_argument("--network", type=floats, default=NETWORKS, help="network efficiencies, comma-separated")
    ap.add_argument("--exponents", type=floats, default=EXPONENTS, help="gemm_overlap values (0: the max)")
    args = ap.parse_args()
    for p in args.exponents:
        try:
            options(p)
        except SpecError as e:
            ap.error(f"--exponents: {e}")
    main(args.network, args.exponents)
