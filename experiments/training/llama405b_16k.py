"""The best ways to train Llama-3.1-405B on 16,384 H100s (issue 38): a small
grid of TP, PP, VP, CP, micro-batch and recomputation, evaluated in one
`jax.vmap` of `cost.training.train_step`.

Fixed: BF16 (Meta trained Llama 3 in BF16), sequences of 8,192 tokens, a
global batch of 2,048 sequences (16M tokens, the Llama 3 paper's batch in its
main pre-training stage, Sec. 3.4), Megatron's distributed optimizer (ZeRO 1),
TP communication overlapped with the GEMMs (overlap 1). Data parallel =
16,384 / (tp·pp·cp). A configuration counts when every divisibility check
holds (training_memory.checks) and it fits in 80 GB. Prints the top 5 by
tokens/s per chip and how the best one's step time splits, and writes the top 5's
split as a figure (experiments/training/MODEL-CHIPS-split.png).

    .venv/bin/python experiments/training/llama405b_16k.py
    # GPT-3 175B on an Eos-sized cluster (10,752 H100s), 2,048-token sequences, 300B tokens; a global batch
    # of 2,688 sequences, a multiple of the 21 in 10,752 = 512 x 21 (so that data parallelism divides it):
    .venv/bin/python experiments/training/llama405b_16k.py --model gpt-3-175b --chips 10752 --seq 2048 \
        --global-batch 2688 --tokens 300e9
    # a DeepSeek-V3-style MoE with expert parallelism (2,048 GPUs, 4K sequences, 15,360-sequence batches,
    # 14.8T tokens, FP8: DeepSeek-V3 report Sec. 3-4), here on H100s:
    .venv/bin/python experiments/training/llama405b_16k.py --model deepseek-v3 --chips 2048 --seq 4096 \
        --global-batch 15360 --tokens 14.8e12 --ep 8,16,32,64 --fp8 [--ep-overlap 1] [--moe-dispatcher fused]
    # (--ep-overlap 1: the EP all-to-alls hidden, as DeepSeek-V3's DualPipe overlaps them with a second
    # micro-batch's compute; by default they are exposed: TrainWorkload.ep_overlap. --moe-dispatcher fused:
    # DeepEP's kernels, one crossing of InfiniBand per remote node a token's experts are on)
"""

import argparse
import itertools
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from jaxplat.cost.training import COMM_NAMES, MOE_DISPATCHERS, RECOMPUTE, TrainOptions, TrainWorkload, train_step  # noqa: E402
from jaxplat.cost.training_memory import checks  # noqa: E402
from jaxplat.model import Parallel, load_hardware, load_model, network_level_names  # noqa: E402
from jaxplat.specs.units import DTYPES  # noqa: E402

HERE = Path(__file__).resolve().parent
PHASES = ("forward", "backward", "recompute", "scaling", "host", "optimizer", "bubble")  # TrainMetrics fields
SHOWN = {"scaling": "low-precision casts", "host": "MoE host time"}  # how a field is printed
GRID = {"tp": (2, 4, 8), "pp": (4, 8, 16, 32), "vp": (1, 2, 4, 8), "cp": (1, 2, 4), "mb": (1, 2), "rec": (0, 1, 2),
        "ep": (1,)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama-3.1-405b")
    ap.add_argument("--hardware", default="h100-sxm")
    ap.add_argument("--chips", type=int, default=16384)
    ap.add_argument("--seq", type=float, default=8192.0)
    ap.add_argument("--global-batch", type=float, default=2048.0)
    ap.add_argument("--tokens", type=float, default=15.6e12, help="tokens to train on (Llama 3: 15.6T)")
    ap.add_argument("--ep", default="1", help="expert-parallel degrees to try, comma-separated (MoE models)")
    ap.add_argument("--fp8", action="store_true", help="FP8 GEMMs with 128-element block scales (DeepSeek-V3's "
                                                       "recipe, Sec. 3.3) instead of BF16")
    ap.add_argument("--figure", help="where to write the top 5's step-time split (default: "
                                     "experiments/training/MODEL-CHIPS-split.png)")
    ap.add_argument("--moe-dispatcher", default="alltoall", choices=MOE_DISPATCHERS,
                    help="MoE token dispatcher (TrainOptions.moe_dispatcher; DeepEP, as DeepSeek-V3 trained: fused)")
    ap.add_argument("--ep-overlap", type=float, default=0.0, help="share of the EP all-to-alls hidden, 0..1 "
                                                                  "(TrainWorkload.ep_overlap; DualPipe: 1)")
    ap.add_argument("--moe-host", default=None, help="LAYER_S,EXPERT_S: the MoE layers' exposed host time "
                    "(TrainWorkload.moe_layer_host_s, moe_expert_host_s; default Megatron-Core's fitted one, 0,0 "
                    "for a stack without it)")
    args = ap.parse_args()
    GRID["ep"] = tuple(int(e) for e in args.ep.split(","))
    CHIPS, SEQ, GLOBAL_BATCH = args.chips, args.seq, args.global_batch
    model, hw = load_model(args.model), load_hardware(args.hardware)
    cfgs = np.array(list(itertools.product(*GRID.values())), np.float32)
    tp, pp, vp, cp, mb, rec, ep = cfgs.T
    dp = CHIPS / (tp * pp * cp)
    n = len(cfgs)
    full = lambda v: jnp.full((n,), v, jnp.float32)  # noqa: E731
    degrees = dict(tp=tp, pp=pp, vp=vp, cp=cp, dp=dp, ep=ep, overlap=np.ones(n, np.float32))
    par = Parallel(**{k: jnp.asarray(degrees[k]) if k in degrees else jnp.broadcast_to(v, (n,))
                      for k, v in vars(Parallel()).items()})
    fields = dict(global_batch=full(GLOBAL_BATCH), micro_batch=jnp.asarray(mb), seq=full(SEQ),
                  recompute=jnp.asarray(rec), zero=full(1.0), tokens=full(args.tokens),
                  ep_overlap=full(args.ep_overlap))
    if args.moe_host:
        layer, expert = (float(x) for x in args.moe_host.split(","))
        fields.update(moe_layer_host_s=full(layer), moe_expert_host_s=full(expert))
    if args.fp8:
        fields.update(bytes_act=full(1.0), compute_dtype=full(float(DTYPES.index("fp8"))), scale_block=full(128.0))
    defaults = TrainWorkload(global_batch=1.0, micro_batch=1.0, seq=1.0)
    twl = TrainWorkload(**{k: fields.get(k, jnp.broadcast_to(v, (n,))) for k, v in vars(defaults).items()})
    topts = TrainOptions(moe_dispatcher=args.moe_dispatcher)
    step = jax.jit(jax.vmap(lambda p, w: (train_step(model, hw, p, w, topts), checks(model, p, w))))
    m, ok = jax.device_get(step(par, twl))
    valid = np.all(np.stack(list(ok.values())), axis=0) & (dp == np.round(dp)) & (dp >= 1) & m.fits
    print(f"{n} configurations, {int(valid.sum())} feasible (divisible and fit in memory)")
    if not valid.any():
        return
    order = np.argsort(np.where(valid, -m.tokens_per_s_per_chip, np.inf))[:5]
    print(f"{'tp':>3s} {'pp':>3s} {'vp':>3s} {'cp':>3s} {'ep':>3s} {'dp':>5s} {'mb':>3s} {'recompute':>9s} "
          f"{'step s':>7s} "
          f"{'tok/s/chip':>10s} {'MFU':>6s} {'mem GB':>7s} {'bubble':>7s} {'days':>7s}")
    for i in order:
        print(f"{tp[i]:3.0f} {pp[i]:3.0f} {vp[i]:3.0f} {cp[i]:3.0f} {ep[i]:3.0f} {dp[i]:5.0f} {mb[i]:3.0f} "
              f"{RECOMPUTE[int(rec[i])]:>9s} "
              f"{m.step_time_s[i]:7.2f} {m.tokens_per_s_per_chip[i]:10.1f} {100 * m.mfu[i]:5.1f}% "
              f"{m.memory_bytes[i] / 1e9:7.1f} {100 * m.bubble_fraction[i]:6.1f}% {m.train_time_s[i] / 86400:7.1f}")
    # The degrees of the Llama 3 paper's 8K-sequence pre-training (Table 4: TP 8, CP 1, PP 16, DP 128; an
    # interleaved schedule, Sec. 3.3.2): the best of our grid with them.
    meta = np.flatnonzero(valid & (tp == 8) & (pp == 16) & (cp == 1))
    if meta.size and args.model == "llama-3.1-405b" and CHIPS == 16384:
        i = meta[np.argmax(m.tokens_per_s_per_chip[meta])]
        rank = int(np.sum(valid & (m.tokens_per_s_per_chip > m.tokens_per_s_per_chip[i]))) + 1
        print(f"Llama 3 paper's degrees (tp 8, pp 16, cp 1, dp 128), best vp {vp[i]:.0f} mb {mb[i]:.0f} recompute "
              f"{RECOMPUTE[int(rec[i])]}: {m.tokens_per_s_per_chip[i]:.1f} tok/s/chip, MFU {100 * m.mfu[i]:.1f}%, "
              f"rank {rank} of {int(valid.sum())}")
    b = order[0]
    levels = network_level_names(args.hardware)
    print(f"\nStep time of the best ({m.step_time_s[b]:.2f} s), by phase:")
    for k in PHASES:
        print(f"  {SHOWN.get(k, k):28s} {getattr(m, k)[b]:8.3f} s {100 * getattr(m, k)[b] / m.step_time_s[b]:5.1f}%")
    for c, name in enumerate(COMM_NAMES):
        for j, lv in enumerate(levels):
            t = m.comm[b][c][j]
            if t > 0:
                print(f"  {name} collectives on {lv:14s} {t:8.3f} s {100 * t / m.step_time_s[b]:5.1f}% exposed "
                      f"(of {m.comm_total[b][c]:.3f} s in all)")
    labels = [f"tp{tp[i]:.0f} pp{pp[i]:.0f} vp{vp[i]:.0f} cp{cp[i]:.0f} ep{ep[i]:.0f} mb{mb[i]:.0f} "
              f"{RECOMPUTE[int(rec[i])]}" for i in order]
    parts = {SHOWN.get(k, k): [float(getattr(m, k)[i]) for i in order] for k in PHASES}
    for c, name in enumerate(COMM_NAMES):
        for j, lv in enumerate(levels):
            ts = [float(m.comm[i][c][j]) for i in order]
            if any(t > 0 for t in ts):
                parts[f"{name} on {lv}"] = ts
    out = Path(args.figure or HERE / f"{args.model}-{CHIPS}-split.png")
    plot_split(labels, parts, f"{args.model} on {CHIPS:,} x {args.hardware}: the top 5 by tokens/s per chip", out)
    print(f"wrote {out}")


def plot_split(labels, parts, title, path):
    """Horizontal stacked bars: each configuration's step time by phase and
    exposed collective per network level (seconds)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(labels) + 2.2))
    left = np.zeros(len(labels))
    colors = plt.get_cmap("tab20").colors
    for (name, ts), color in zip(parts.items(), colors):
        if not any(ts):
            continue
        ax.barh(labels, ts, left=left, label=name, color=color)
        left += np.array(ts)
    ax.invert_yaxis()  # the best on top
    ax.set_xlabel("step time (s)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
