"""Kernel checks that pin efficiencies apart from any engine (issue 37).

Predicts the kernel rows of data/measured/inference_2026-12.csv with
jaxplat's own cost functions, one operator at a time, on the shipped
efficiencies (specs/calibration/default.yaml through load_hardware) and the
default graph-captured software stack (its launch costs; its `moe_speed`, an
engine's MoE layers around the kernel, is not a kernel's and is set to 1):
  DeepGEMM   FP8 GEMMs and grouped GEMMs by (M, N, K) on an H800 (= the
             h100-sxm spec: H100's compute and HBM), one row of an OpTable
             through jaxplat.cost.inference.row_components (efficiency.row_rates:
             gemm_peak x tile/wave quantization x kernel kind; the roofline's
             memory time; the stack's kernel_latency). Plain roofline (no L2
             placement): DeepGEMM's bench_kineto flushes the L2 between runs.
  FA3        FlashAttention-3 forward TFLOP/s on H100 by head dim, sequence
             length, causal mask and dtype (the score, softmax and
             weighted-sum rows, the exponentials on the first, a causal
             mask's diagonal tiles, each row's compute and memory joined as
             efficiency.attention_overlap joins them; FA3's FLOP count:
             4 B S^2 H D, halved when causal). Its BF16 fit rows at S=16k pin
             `attention_compute`.
  FA2        FlashAttention-2 on the same H100 (the FA3 paper's figures):
             the same rows with the matmuls at FA2_ON_HOPPER of FA3's rate,
             which its BF16 fit rows at S=16k pin (training's FA2 kernel).
  NCCL       all-reduce (and all-gather) bus bandwidth from
             jaxplat.cost.collectives.collective_time on h100-sxm's levels
             (H800: NVLink 400 GB/s both ways = 200 GB/s per direction).
  DeepEP     dispatch / combine as collective_time("alltoall") (+ the stack's
             collective_latency): bandwidth of the bytes a rank sends to other
             ranks (NVLink, intranode) or across nodes (RDMA), and the
             low-latency kernels' latency (pure RDMA: no NVLink level).
  SSD        mamba_ssm's Mamba-2 chunked scan on an H100 (data/measured/
             kernels_ssd.csv, vLLM PR 27299): tokens/s of the scan row of a
             one-layer Mamba-2 prefill at the benchmark's shape. Its plateau
             (>= 4,096 tokens) set `scan` and is shown as "fit"; the shorter
             runs as "other" (nothing is chosen on them).
The split (data/measured/inference_split.yaml) marks each row fit,
validation or test; summaries are per role, test rows only with --test.

Run: .venv/bin/python experiments/kernel_check.py [--test]
"""

import csv
import functools
import re
import statistics
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat import Options, Parallel, load_hardware, replace
from jaxplat.cost.attention_kernels import FA2_ON_HOPPER
from jaxplat.cost.collectives import collective_time
from jaxplat.cost.dtypes import computed_workload
from jaxplat.cost.efficiency import row_cores
from jaxplat.cost.inference import row_components
from jaxplat.cost.operators import NUMERIC, SOFTMAX_FLOPS, OpTable, _Rows, build_table
from jaxplat.cost.opkind import OpKind
from jaxplat.cost.roofline import combine
from jaxplat.design.splits import load_inference_split
from jaxplat.model import model_from_config, workload_from_dict
from jaxplat.specs.units import BYTES_PER_ELEMENT

KERNEL_OPTS = Options(memory_hierarchy=False)
HIDDEN_V3, TOPK_V3 = 7168, 8  # DeepSeek-V3 hidden size and routed experts per token (DeepEP's test shapes)
MESSAGE = 4 * 2**30  # bytes per chip of a "large message" all-reduce (nccl-tests sweeps to GiBs)


def h800():
    """H800 SXM5: H100's compute and HBM, NVLink 400 GB/s both ways (200 per direction)."""
    hw = load_hardware("h100-sxm")
    return replace(hw, net_bw=hw.network.bandwidth.at[0].set(200e9))


def _rows_time(hw, dtype, rows, opts=KERNEL_OPTS):
    """Seconds of operator rows run one after another (the model's own
    row_components + combine, a multi-query attention kernel's rows joined
    as efficiency.attention_overlap joins them): `rows` are (kind, flops, a,
    w, o, mkn) or (..., queries) for such a kernel's rows (query rows x heads)."""
    hw = replace(hw, moe_speed=1.0)  # a kernel measured alone runs in no engine's MoE layer (software.moe_speed)
    r = _Rows(counts={"once": (1.0, 1.0)})
    for i, (kind, flops, a, w, o, mkn, *queries) in enumerate(rows):
        r.add(f"op{i}", "op", "once", kind, f=(flops, 0.0), a=(a, 0.0), w=(w, 0.0), o=(o, 0.0), stored=w, mkn=mkn,
              queries=queries[0] if queries else 0.0)
    # The rows' numbers as one [rows, columns] array and their static fields apart: the bisections
    # below call this for every efficiency they try, and building the table's 22 arrays one by one
    # (_Rows.table) took most of a call's time.
    cells = np.array([[row[k] for k in NUMERIC] for row in r.rows], np.float32)
    layout = tuple(r.static_fields().items())
    return float(_table_time(cells, layout, hw, _workload(dtype), opts))


@functools.cache
def _workload(dtype):
    return workload_from_dict({"batch": 1, "prompt": 1, "output": 1, "dtype": dtype})


@functools.partial(jax.jit, static_argnames=("layout", "opts"))
def _table_time(cells, layout, hw, wl, opts):
    """Seconds of a table's rows (`cells` [rows, NUMERIC]; `layout` its static
    fields as (name, tuple) pairs, _Rows.static_fields), one after another:
    compiled once per layout (run op by op, a call took about 0.1 s)."""
    table = OpTable(**{k: cells[:, i] for i, k in enumerate(NUMERIC)}, **dict(layout))
    wl = computed_workload(hw, wl, opts)
    c0, _, m0, _, comm = row_components(table, hw, wl, opts)
    return jnp.sum(row_cores(table, hw, opts, c0, m0) + comm)


def _one_row(hw, dtype, kind, flops, a, w, o, mkn, opts=KERNEL_OPTS):
    """Seconds of one operator row."""
    return _rows_time(hw, dtype, [(kind, flops, a, w, o, mkn)], opts)


def gemm_prediction(hw, m, n, k, groups=1, grouped=False, dtype="fp8", opts=KERNEL_OPTS):
    """(TFLOP/s, GB/s) of `groups` m x n x k GEMMs in `dtype` with BF16 output
    (DeepGEMM's convention for the bytes: A and B in dtype, D in BF16); `opts`:
    the cost model's static options (Options.gemm_overlap: a variant)."""
    b = BYTES_PER_ELEMENT[dtype]
    a, w, o = groups * m * k * b, groups * k * n * b, groups * m * n * 2.0
    t = _one_row(hw, dtype, OpKind.EXPERT_GEMM if grouped else OpKind.GEMM, 2.0 * m * n * k * groups, a, w, o,
                 (m, k, n), opts)
    return 2.0 * m * n * k * groups / t / 1e12, (a + w + o) / t / 1e9


def attention_prediction(hw, batch, seq, head_dim, heads, causal, dtype="bf16"):
    """FA3-convention TFLOP/s of one forward attention (self-attention, seq x seq)."""
    b = BYTES_PER_ELEMENT[dtype]
    pairs = seq * (seq + 1.0) / 2.0 if causal else seq * seq  # as operators.attention charges them
    mm = 2.0 * batch * heads * head_dim * pairs  # each matmul's FLOPs
    qkvo = batch * seq * heads * head_dim * b  # bytes of each of Q, K, V and the output
    # the kernel's rows as operators.attention builds them: scores (reading Q and K; the exponentials
    # ride on it), softmax, weighted sum (reading V, writing the output); the scores stay on chip. A causal
    # mask's diagonal tiles (compute.diagonal_flops) and the overlap of streams and matmuls
    # (efficiency.attention_overlap) come from the rows' query count, as the model's prefill rows; a
    # non-causal kernel has no diagonal (the model's prefill is causal: here its tile is one row).
    hw = hw if causal else replace(hw, chip=replace(hw.chip, tile_m=jnp.float32(1.0)))
    t = _rows_time(hw, dtype, [(OpKind.SCORES, mm, qkvo, qkvo, 0.0, (seq, head_dim, seq), batch * heads * seq),
                               (OpKind.SOFTMAX, SOFTMAX_FLOPS * batch * heads * pairs, 0.0, 0.0, 0.0, (0, 0, 0),
                                batch * heads * seq),
                               (OpKind.ATTEND, mm, 0.0, qkvo, qkvo, (seq, seq, head_dim), batch * heads * seq)])
    flops_fa3 = 4.0 * batch * heads * head_dim * seq * seq / (2.0 if causal else 1.0)
    return flops_fa3 / t / 1e12


def busbw(hw, kind, n, nbytes=MESSAGE):
    """nccl-tests bus bandwidth, GB/s: algbw x 2(n-1)/n (all-reduce), x (n-1)/n (all-gather)."""
    t = float(collective_time(kind, hw, jnp.float32(n), jnp.float32(nbytes)))
    return nbytes / t * (2.0 if kind == "allreduce" else 1.0) * (n - 1) / n / 1e9


def alltoall(hw, n, nbytes):
    """Seconds of one all-to-all of `nbytes` sent per rank (+ the stack's fixed cost per call)."""
    return (float(collective_time("alltoall", hw, jnp.float32(n), jnp.float32(nbytes)))
            + float(hw.software.collective_latency))


def _mnk(notes):
    g = dict(re.findall(r"(groups|M_per_group|M|N|K)=(\d+)", notes))
    return int(g.get("M", g.get("M_per_group", 0))), int(g["N"]), int(g["K"]), int(g.get("groups", 1))


def deepgemm(rows, hw=None, opts=KERNEL_OPTS):
    """(role, label, predicted, measured) of DeepGEMM's rows on `hw` (default h100-sxm as shipped)."""
    hw, out = hw or load_hardware("h100-sxm"), []
    for r, role in rows:
        if r["engine"] != "DeepGEMM":
            continue
        m, n, k, g = _mnk(r["notes"])
        tf, gb = gemm_prediction(hw, m, n, k, g, grouped=g > 1 or "Grouped" in r["notes"], opts=opts)
        pred = tf if r["metric"] == "tflops" else gb
        grp = "grp" if "Grouped" in r["notes"] else ""
        out.append((role, f"{r['metric']:<12} M={m:<5} N={n:<5} K={k:<5} g={g} {grp}", pred, float(r["value"])))
    return out


def flash_attention(rows, hw=None, version=3, speed=FA2_ON_HOPPER):
    """(role, label, predicted, measured) TFLOP/s of FlashAttention-`version`'s
    forward rows on an H100: FA3 on `hw` (default h100-sxm as shipped), FA2
    with its matmuls at `speed` of FA3's (the training stack's
    attention_kernel_speed, FA2_ON_HOPPER)."""
    hw, out = hw if hw is not None else load_hardware("h100-sxm"), []
    if version == 2:
        hw = replace(hw, eff_attention_compute=hw.efficiency.attention_compute * speed)
    for r, role in rows:
        ours = (r["engine"] == "FlashAttention-2" if version == 2
                else "FlashAttention-3" in r["engine"] or r["engine"].startswith("flash_v3"))
        if not ours or r["metric"] != "tflops":
            continue
        hd = int(re.search(r"head_dim=(\d+)", r["model"] + " " + r["notes"]).group(1)) if "head_dim" in r["model"] \
            else int(re.search(r"--d-head (\d+)", r["notes"]).group(1))
        seq, batch = int(r["isl"]), int(r["concurrency_or_batch"].split("=")[1])
        heads = 16 if "heads=16" in r["model"] else 2048 // hd
        causal = re.search(r"(?<!non-)causal \(inferred", r["notes"]) is not None  # "causal unknown": full
        dtype = "fp8" if r["dtype_weights"].startswith("fp8") else "bf16"
        pred = attention_prediction(hw, batch, seq, hd, heads, causal, dtype)
        out.append((role, f"{r['source'][:18]} hd={hd:<3} S={seq:<5} {'causal' if causal else 'full  '} {dtype}",
                    pred, float(r["value"])))
    return out


def nccl(rows):
    out = []
    for r, role in rows:
        if not r["source"].startswith(("NVIDIA/nccl", "NVIDIA/nccl-tests")) or r["metric"] == "algbw_gb_s":
            continue
        hw = h800() if "H800" in r["chip"] else load_hardware("h100-sxm")
        n = int(r["chips"].split()[0])
        kind = "allgather" if "non-allreduce" in r["notes"] else "allreduce"  # the model picks the algorithm
        out.append((role, f"{r['source'][14:32]} {r['chip'][:16]} n={n} {kind}", busbw(hw, kind, n), float(r["value"])))
    return out


def _deepep_bytes(r, tokens):
    per_token = HIDDEN_V3 * (1.0 if "dispatch" in r["metric"] else 2.0)  # dispatch FP8, combine BF16
    return tokens * TOPK_V3 * per_token


def deepep(rows):
    out = []
    for r, role in rows:
        if r["engine"] != "DeepEP":
            continue
        n, tokens = int(r["chips"]), int(r["concurrency_or_batch"].split()[0])
        hw = load_hardware("b200") if "SM100" in r["chip"] else h800()
        low_latency = "low-latency" in r["notes"]
        if low_latency:  # pure RDMA: every peer across the NIC
            hw = replace(hw, net_domain=hw.network.domain.at[0].set(1.0))
        nbytes = _deepep_bytes(r, tokens)
        t = alltoall(hw, n, nbytes)
        if r["metric"].endswith("latency_us"):
            pred = t * 1e6
        elif "logical" in r["notes"]:
            pred = nbytes / t / 1e9
        else:  # bytes this rank sends over the bottleneck (NVLink in a node, the NIC across nodes)
            local = 1 if low_latency else min(n, 8)
            pred = nbytes * ((n - 1) / n if n <= 8 and not low_latency else (n - local) / n) / t / 1e9
        out.append((role, f"{r['metric']:<27} n={n:<3} tok={tokens:<5} {r['chip'][:6]}", pred, float(r["value"])))
    return out


SSD_CSV = Path(__file__).resolve().parents[1] / "data" / "measured" / "kernels_ssd.csv"


def ssd(path=SSD_CSV):
    """(role, label, predicted, measured tokens/s) of the Mamba-2 scan kernel rows."""
    hw = load_hardware("h100-sxm")
    out = []
    with open(path) as f:
        for r in csv.DictReader(f):
            heads, hd, groups, state, chunk, tok = (int(r[k]) for k in ("heads", "head_dim", "groups", "d_state",
                                                                       "chunk", "tokens"))
            model = model_from_config(dict(model_type="mamba2", num_hidden_layers=1, hidden_size=heads * hd // 2,
                                           state_size=state, num_heads=heads, head_dim=hd, n_groups=groups,
                                           expand=2, conv_kernel=4, vocab_size=1000, chunk_size=chunk))
            wl = workload_from_dict({"batch": 1, "prompt": tok, "output": 2})
            t = build_table(model, Parallel(), wl, "prefill", KERNEL_OPTS)
            c0, _, m0, _, comm = row_components(t, hw, wl, KERNEL_OPTS)
            seconds = float(combine(c0, m0, comm)[t.names.index("ssm_scan")])
            out.append(("fit" if tok >= 4096 else "other", f"mamba_chunk_scan_combined tokens={tok:<6d} h={heads} "
                        f"p={hd} g={groups} N={state} Q={chunk}", tok / seconds, float(r["value"])))
    return out


def summary(items, label):
    errs = [p / m - 1.0 for _, _, p, m in items]
    if not errs:
        return f"  {label:<11} n=0"
    return (f"  {label:<11} n={len(errs):<3} median |error| {100 * statistics.median(abs(e) for e in errs):6.1f}%  "
            f"median signed {100 * statistics.median(errs):+6.1f}%")


def report(name, items, show_test):
    print(f"\n== {name}: predicted vs measured ==")
    for role, what, p, m in items:
        if role == "test" and not show_test:
            continue
        print(f"  {role:<10} {what:<58} pred {p:8.1f}  meas {m:8.1f}  {100 * (p / m - 1):+6.1f}%")
    for role in ("validation", "fit", "other") + (("test",) if show_test else ()):
        if role != "other" or any(x[0] == role for x in items):
            print(summary([x for x in items if x[0] == role], role))


def kernel_rows():
    """[(row, role)] of the kernel rows of the inference CSV, with their split role."""
    rows, roles = load_inference_split()
    return [(r, ro) for r, ro in zip(rows, roles) if r["load_kind"] == "kernel"]


def fit_items(items, *words):
    """The fit rows of `items` whose label holds every one of `words`."""
    return [x for x in items if x[0] == "fit" and all(w in x[1] for w in words)]


def median_ratio(items):
    """Median measured / predicted of (role, label, predicted, measured) items."""
    return statistics.median(m / p for _, _, p, m in items)


def solve(ratio, lo, hi, steps=30):
    """x in [lo, hi] where ratio(x) = 1, by bisection, for a `ratio` (measured /
    predicted) that falls as the efficiency x rises."""
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ratio(mid) > 1.0 else (lo, mid)
    return 0.5 * (lo + hi)


def implied_memory(hw, opts=KERNEL_OPTS):
    """`memory` (fraction of HBM peak) at which DeepGEMM's M=64 fit rows come out
    right in the median: those GEMMs stream their FP8 weights once (15-117 MB)
    with too few rows to be compute-bound, as a decode step's GEMMs do. Solved
    by bisection on the model's own prediction (kernel latency, tile and wave
    terms included), not a ratio: the fixed time does not scale."""
    rows, roles = load_inference_split()
    shapes = [(_mnk(r["notes"]), float(r["value"])) for r, role in zip(rows, roles)
              if role == "fit" and r["engine"] == "DeepGEMM" and r["metric"] == "mem_bw_gb_s"
              and "Normal GEMMs" in r["notes"] and _mnk(r["notes"])[0] == 64]

    def ratio(mem):
        h = replace(hw, efficiency=replace(hw.efficiency, memory=mem))
        return statistics.median(meas / gemm_prediction(h, m, n, k, opts=opts)[1] for (m, n, k, _), meas in shapes)

    return solve(ratio, 0.3, 1.0)  # measured/predicted falls as `memory` rises; the root lies between


def _at_s16k(items):
    """The BF16 fit rows at S = 16,384 (where `attention_compute` and FA2's speed are solved)."""
    return fit_items(items, "bf16", "S=16384")


def implied_attention_compute(hw):
    """`attention_compute` at which FlashAttention-3's BF16 fit rows at S=16k come
    out right in the median (bisection on the model's own prediction: the
    exponentials' and the kernel launch's time do not scale with it)."""
    rows = kernel_rows()

    def ratio(x):
        return median_ratio(_at_s16k(flash_attention(rows, replace(hw, eff_attention_compute=x))))
    return solve(ratio, 0.5, 1.33)


def implied_fa2_speed(hw):
    """FlashAttention-2's matmul rate over FlashAttention-3's on an H100 (the
    training stack's attention_kernel_speed, FA2_ON_HOPPER) at which FA2's BF16
    fit rows at S=16k come out right in the median."""
    rows = kernel_rows()

    def ratio(s):
        return median_ratio(_at_s16k(flash_attention(rows, hw, version=2, speed=s)))
    return solve(ratio, 0.05, 1.0)


def implied(dg, fa, nets, scans=()):
    """Efficiencies the fit rows imply, next to the shipped ones."""
    hw = load_hardware("h100-sxm")
    shipped = float(hw.efficiency.compute * hw.efficiency.narrow_dtype)
    print("\n== implied efficiencies (fit rows), shipped values unchanged ==")
    big = [x for x in dg if x[0] == "fit" and "tflops" in x[1] and "M=4096" in x[1] and "grp" not in x[1]]
    ratio = median_ratio(big)
    print(f"  DeepGEMM dense FP8, M=4096 (at the shipped tile_latency "
          f"{float(hw.efficiency.tile_latency) * 1e6:.1f} us; experiments/kernel_pins.py solves both): "
          f"measured/predicted median {ratio:.3f} -> eff_compute x eff_narrow "
          f"{shipped * ratio:.3f} (shipped {float(hw.efficiency.compute):.3f} x "
          f"{float(hw.efficiency.narrow_dtype):.3f} = {shipped:.3f})")
    print(f"  DeepGEMM dense FP8, M=64 (weight streaming, memory-bound): eff_memory {implied_memory(hw):.3f} "
          f"puts the median measured/predicted at 1 (shipped {float(hw.efficiency.memory):.3f})")
    grp = [x for x in dg if x[0] == "fit" and "tflops" in x[1] and "grp" in x[1]]
    if grp:
        r = median_ratio(grp)
        print(f"  DeepGEMM grouped FP8 (contiguous): measured/predicted {r:.3f} -> eff_moe "
              f"{float(hw.efficiency.moe) * r:.3f} "
              f"(shipped {float(hw.efficiency.moe):.3f}; at most 1: grouped run as dense)")
    if _at_s16k(fa):
        print(f"  FA3 BF16 at S=16k: measured/predicted {median_ratio(_at_s16k(fa)):.3f} -> attention_compute "
              f"{implied_attention_compute(hw):.3f} (shipped {float(hw.efficiency.attention_compute):.3f}: its "
              f"matmuls at {float(hw.efficiency.compute * hw.efficiency.attention_compute):.3f} of the peak, "
              f"beside the exponentials at {float(hw.chip.exp_rate) / 1e12:.2f}e12/s)")
        print(f"  FA2 BF16 at S=16k: its matmuls at {implied_fa2_speed(hw):.3f} of FA3's "
              f"(attention_kernels.FA2_ON_HOPPER {FA2_ON_HOPPER:.3f})")
    plateau = [x for x in scans if x[0] == "fit"]
    if plateau:
        r = statistics.median(m for *_, m in plateau) / statistics.median(p for *_, p in plateau)
        print(f"  Mamba-2 SSD scan, plateau (>= 4096 tokens): median measured / median predicted {r:.3f} -> "
              f"eff_scan {float(hw.efficiency.scan) * r:.3f} (shipped {float(hw.efficiency.scan):.3f})")
    for what, items in nets:
        if items:
            r = median_ratio(items)
            print(f"  {what}: measured/predicted {r:.3f} -> eff_network {float(hw.efficiency.network) * r:.3f} "
                  f"(shipped {float(hw.efficiency.network):.3f})")


def main(argv=None):
    show_test = "--test" in (argv if argv is not None else sys.argv[1:])
    kernel = kernel_rows()
    dg, fa, nc, ep = deepgemm(kernel), flash_attention(kernel), nccl(kernel), deepep(kernel)
    fa2 = flash_attention(kernel, version=2)
    scans = ssd()
    for name, items in (("DeepGEMM FP8 GEMM (H800 = h100-sxm)", dg), ("FlashAttention-3 forward (H100)", fa),
                        ("FlashAttention-2 forward (H100; matmuls at FA2_ON_HOPPER of FA3's)", fa2),
                        ("NCCL bus bandwidth", nc), ("DeepEP dispatch/combine", ep),
                        ("Mamba-2 SSD scan, tokens/s (H100)", scans)):
        report(name, items, show_test)

    implied(dg, fa, (("NCCL all-reduce, 8 H100 NVLink (NVLS)", fit_items(nc, "n=8 ", "allreduce")),
                     ("DeepEP normal dispatch/combine, 8 H800 NVLink", fit_items(ep, "bottleneck", "n=8 ")),
                     ("DeepEP normal dispatch/combine, 16-64 H800 over RDMA",
                      [x for x in fit_items(ep, "bottleneck") if "n=8 " not in x[1]])), scans)
    if show_test:
        print("\n(TEST rows shown above: tritonbench flash_v3, reported once.)")


if __name__ == "__main__":
    main()
