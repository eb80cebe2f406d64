"""Run SCALE-Sim 3.0.0 on LLM GEMM shapes; write tests/data/scalesim/gemm_cycles.csv.

SCALE-Sim is the reference for `jaxplat.cost.microarch.gemm_cycles`. It is NOT a
dependency of jaxplat: it needs numpy<2, so it lives in its own virtualenv and
this script runs there (it imports nothing of jaxplat):

    python3 -m venv /tmp/scalesim-venv
    /tmp/scalesim-venv/bin/pip install scalesim==3.0.0 'numpy<2'
    timeout 1800 /tmp/scalesim-venv/bin/python experiments/microarch/scalesim_reference.py

(`--dry-run` lists the chosen runs and SCALE-Sim's estimated work; `--jobs N`
runs N array configurations at once.)

What is recorded: the "Total Cycles" column of SCALE-Sim's COMPUTE_REPORT.csv
(compute cycles; the column before it adds DRAM prefetch). The config runs in
CALC bandwidth mode (InterfaceBandwidth = CALC), where SCALE-Sim's read
buffers are stall-free (memory/read_buffer_estimate_bw.py), and the SRAMs are
large enough that the output buffer never waits on a drain, so Stall Cycles is
0 (checked below) and "Total Cycles" is pure compute.

Shapes. GEMMs (M x K) . (K x N) of Llama-3.1-8B, Llama-2-7B and Mixtral-8x7B
(dims from specs/models/), sharded by tensor parallelism so that N and K lie in
128..4096, at decode batch M = 1..64 and prefill M = 128..2048, plus per-head
attention (head dim 128). Arrays from 32x32 to 256x256 (two rectangular ones
catch a rows/cols swap), dataflows ws, os, is.

Feasibility. SCALE-Sim steps through every cycle in Python, costing about a
microsecond per operand element of its demand matrices (lines x (rows +
2 cols)); a 256x256 array on a 64 x 4096 x 4096 GEMM takes 100 s. So each
(array, dataflow) keeps a fixed-seed sample of the candidates whose estimated
work is at most MAX_WORK elements (~10 s each) within GROUP_WORK per group:
341 runs, about ten minutes of one core (23 min wall on a shared, loaded
2-core machine). The work estimate uses the fold arithmetic only to choose
shapes; the recorded cycles come from SCALE-Sim alone.
"""

import argparse
import csv
import math
import os
import random
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from importlib.metadata import version
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "scalesim" / "gemm_cycles.csv"
ARRAYS = [(32, 32), (64, 64), (128, 128), (256, 256), (128, 32), (32, 128)]
DATAFLOWS = ["ws", "os", "is"]
MAX_WORK = 1.5e7    # demand-matrix elements per run (SCALE-Sim's cost, ~10 s)
GROUP_WORK = 4.5e7  # per (array, dataflow): 18 groups, ~10 min on one core
PER_GROUP = 20      # runs per (array, dataflow)
SEED = 17

DECODE_M = [1, 4, 16, 48, 64]
PREFILL_M = [128, 200, 512, 1000, 2048]
# (N, K, what it is); tp = tensor-parallel degree that brings N, K into 128..4096.
LINEAR = [
    (4096, 4096, "llama-3.1-8b q_proj"),
    (1024, 4096, "llama-3.1-8b k_proj/v_proj"),
    (1536, 4096, "llama-3.1-8b qkv tp4"),
    (4096, 1024, "llama-3.1-8b o_proj tp4"),
    (3584, 4096, "llama-3.1-8b up+gate tp8"),
    (4096, 1792, "llama-3.1-8b down tp8"),
    (128, 4096, "llama-3.1-8b k_proj tp8"),
    (512, 4096, "llama-3.1-8b q_proj tp8"),
    (4096, 512, "llama-3.1-8b o_proj tp8"),
    (256, 4096, "llama-3.1-8b k_proj/v_proj tp4"),
    (2752, 4096, "llama-2-7b up tp4"),
    (4096, 2752, "llama-2-7b down tp4"),
    (1792, 4096, "mixtral-8x7b expert up tp8"),
    (4096, 896, "mixtral-8x7b expert down tp16"),
    (688, 4096, "llama-2-7b up tp16"),
    (4096, 688, "llama-2-7b down tp16"),
]

CONFIG = """[general]
run_name = run

[architecture_presets]
ArrayHeight = {rows}
ArrayWidth = {cols}
IfmapSramSzkB = 65536
FilterSramSzkB = 65536
OfmapSramSzkB = 65536
IfmapOffset = 0
FilterOffset = 100000000
OfmapOffset = 200000000
Dataflow = {dataflow}
Bandwidth = 10
ReadRequestBuffer = 32
WriteRequestBuffer = 32

[layout]
IfmapCustomLayout = False
IfmapSRAMBankBandwidth = 10
IfmapSRAMBankNum = 10
IfmapSRAMBankPort = 2
FilterCustomLayout = False
FilterSRAMBankBandwidth = 10
FilterSRAMBankNum = 10
FilterSRAMBankPort = 2

[sparsity]
SparsitySupport = false
SparseRep = ellpack_block
OptimizedMapping = false
BlockSize = 8
RandomNumberGeneratorSeed = 40

[run_presets]
InterfaceBandwidth = CALC
UseRamulatorTrace = False
"""


def candidates():
    """(m, n, k, source) GEMMs: projections at every M, attention per head."""
    out = [(m, n, k, f"{src} {'decode' if m < 128 else 'prefill'}")
           for n, k, src in LINEAR for m in DECODE_M + PREFILL_M]
    for p in PREFILL_M:  # prefill attention: scores (p x 128).(128 x p), context (p x p).(p x 128)
        out += [(p, p, 128, "attention QK^T prefill"), (p, 128, p, "attention PV prefill"),
                (p, 128, 128, "attention QK^T/PV on one 128-key block (FlashAttention tile)")]
    for ctx in [1000, 2048, 4096]:  # decode: one query row, or a GQA group of 4 (Llama-3)
        for m in [1, 4]:
            out += [(m, ctx, 128, "attention QK^T decode"), (m, 128, ctx, "attention PV decode")]
    first = {}
    for c in out:  # one run per shape (p = 128 makes QK^T and PV the same GEMM)
        first.setdefault(c[:3], c)
    return list(first.values())


def work(m, n, k, rows, cols, dataflow):
    """Estimated SCALE-Sim work: demand lines x (rows + 2 cols), to pick shapes."""
    sr, sc, t = {"ws": (k, n, m), "os": (m, n, k), "is": (k, m, n)}[dataflow]
    fill = rows if dataflow != "os" else 0
    lines = math.ceil(sr / rows) * math.ceil(sc / cols) * (fill + rows + cols + t - 2)
    return lines * (rows + 2 * cols)


def plan():
    """[(rows, cols, dataflow, [(m, n, k, source), ...]), ...] with bounded work.

    Per (array, dataflow): shuffle the decode and the prefill candidates (fixed
    seed), then take them alternately, skipping any that costs more than twice
    the group's work left (GROUP_WORK) per place left, until PER_GROUP are
    chosen: a few expensive shapes and many cheap ones.
    """
    rng = random.Random(SEED)
    groups = []
    for rows, cols in ARRAYS:
        for df in DATAFLOWS:
            cost = {c: work(*c[:3], rows, cols, df) for c in candidates()}
            ok = [c for c in cost if cost[c] <= MAX_WORK]
            dec, pre = [c for c in ok if c[0] < 128], [c for c in ok if c[0] >= 128]
            rng.shuffle(dec)
            rng.shuffle(pre)
            order = [c for pair in zip(dec, pre) for c in pair] + dec[len(pre):] + pre[len(dec):]
            pick, total = [], 0
            for c in order:
                left = PER_GROUP - len(pick)
                if left and cost[c] <= 2 * (GROUP_WORK - total) / left:
                    pick.append(c)
                    total += cost[c]
            groups.append((rows, cols, df, sorted(pick)))
    return groups


def run_group(group):
    """Run SCALE-Sim once on all shapes of one (array, dataflow); return CSV rows."""
    from scalesim.scale_sim import scalesim

    rows, cols, df, shapes = group
    with tempfile.TemporaryDirectory() as d:
        Path(d, "scale.cfg").write_text(CONFIG.format(rows=rows, cols=cols, dataflow=df))
        # GEMM topology: "Layer, M, N, K," (scalesim/topology_utils.py, load_arrays_gemm)
        Path(d, "gemm.csv").write_text("Layer, M, N, K,\n" + "".join(
            f"g{i}, {m}, {n}, {k},\n" for i, (m, n, k, _) in enumerate(shapes)))
        Path(d, "layout.csv").write_text("Layer,\n")  # read but unused without custom layouts
        sim = scalesim(save_disk_space=True, verbose=False, config=f"{d}/scale.cfg",
                       topology=f"{d}/gemm.csv", layout=f"{d}/layout.csv", input_type_gemm=True)
        sim.run_scale(top_path=d)
        with open(Path(d, "run", "COMPUTE_REPORT.csv")) as f:
            report = list(csv.DictReader(f, skipinitialspace=True))
    out = []
    for (m, n, k, src), rep in zip(shapes, report):
        assert int(rep["Stall Cycles"]) == 0, (m, n, k, rows, cols, df, rep)
        out.append(dict(m=m, n=n, k=k, rows=rows, cols=cols, dataflow=df,
                        cycles=int(rep["Total Cycles"]), scalesim_version=version("scalesim"), source=src))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    groups = plan()
    n = sum(len(g[3]) for g in groups)
    est = sum(work(*s[:3], r, c, df) for r, c, df, shapes in groups for s in shapes)
    print(f"{n} runs in {len(groups)} groups, ~{est:.2e} demand elements", file=sys.stderr)
    if args.dry_run:
        for r, c, df, shapes in groups:
            print(r, c, df, len(shapes), [s[:3] for s in shapes])
        return
    t0 = time.time()
    with ProcessPoolExecutor(args.jobs) as ex:
        results = []
        for g, rows in zip(groups, ex.map(run_group, groups)):
            results += rows
            print(f"{g[0]}x{g[1]} {g[2]}: {len(rows)} runs, {time.time() - t0:.0f} s", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(results[0]))
        w.writeheader()
        w.writerows(results)
    os.replace(tmp, args.out)
    print(f"wrote {len(results)} rows to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
