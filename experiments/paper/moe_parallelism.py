"""MoE parallelism and load imbalance: Mixtral-8x22B on 4 H100s split as TP=4,
EP=4 or TP=2 x EP=2, with balanced routing and with every token routed to one
expert (the busiest expert-parallel rank then gets all of them: imbalance = ep).

Parallel.imbalance is tokens of the busiest EP rank over the mean; EP ranks run
attention data parallel and exchange tokens by all-to-all (jaxplat.model.Parallel).
Prompt 2048, output 256, fp8 (bf16 weights, 282 GB, leave no room for KV on 4 x 80 GB);
batch 1, 16 and 64.

    .venv/bin/python experiments/paper/moe_parallelism.py [--quick] [--out PNG]
"""

import _common as c
import numpy as np

import jaxplat as jp

SPLITS = (("TP4", 4, 1), ("EP4", 1, 4), ("TP2xEP2", 2, 2))
ROUTING = (("balanced", False), ("all tokens to one expert", True))


def main(argv=None):
    a = c.parser(__doc__, "moe_parallelism").parse_args(argv)
    c.setup()
    batches = (1, 64) if a.quick else (1, 16, 64)
    model, hw = jp.load_model("mixtral-8x22b"), jp.load_hardware("h100-sxm")
    configs, keys = [], []
    for b in batches:
        wl = c.workload("chatbot", "fp8", batch=b, prompt=2048, output=256, beams=1)
        for name, tp, ep in SPLITS:
            for route, skewed in ROUTING:
                configs.append((model, hw, jp.Parallel(tp=tp, ep=ep, imbalance=ep if skewed else 1.0), wl))
                keys.append((b, name, route))
    r = c.evaluate_many(configs)
    res = {k: {m: r[m][i] for m in ("ttft", "tpot", "throughput", "fits", "comm_time")} for i, k in enumerate(keys)}

    print("Mixtral-8x22B on 4 x H100 SXM (NVLink), prompt 2048, output 256, fp8")
    rows = []
    for b in batches:
        for name, _, _ in SPLITS:
            bal, skew = res[(b, name, ROUTING[0][0])], res[(b, name, ROUTING[1][0])]
            rows.append([f"{b}", name, c.ms(bal["ttft"]), c.ms(skew["ttft"]), c.ms(bal["tpot"]), c.ms(skew["tpot"]),
                         f"{bal['throughput']:.0f}", f"{skew['tpot'] / bal['tpot']:.2f}x",
                         "yes" if bal["fits"] else "no"])
    print(c.table(["batch", "split", "TTFT bal.", "TTFT one-expert", "TPOT bal.", "TPOT one-expert",
                   "tok/s bal.", "TPOT skew penalty", "fits"], rows, "rlrrrrrrl"))

    fig, axes = c.figure(1, 2, size=(11, 4.2))
    x = np.arange(len(batches))
    w = 0.13
    for ax, metric, label in ((axes[0][0], "ttft", "TTFT (ms)"), (axes[0][1], "tpot", "TPOT (ms)")):
        n = 0
        for si, (name, _, _) in enumerate(SPLITS):
            for ri, (route, _) in enumerate(ROUTING):
                y = [1e3 * res[(b, name, route)][metric] for b in batches]
                ax.bar(x + (n - 2.5) * w, y, w, color=f"C{si}", alpha=1.0 if ri == 0 else 0.45,
                       hatch="" if ri == 0 else "//", label=f"{name}, {route}")
                n += 1
        ax.set_xticks(x, [f"batch {b}" for b in batches])
        ax.set_ylabel(label)
        ax.set_yscale("log")
    axes[0][0].set_title("prefill (2048-token prompt)")
    axes[0][1].set_title("decode step")
    c.save(fig, a.out, "Mixtral-8x22B on 4 H100: TP vs EP vs TPxEP, balanced vs all-to-one-expert routing",
           axes[0][0], ncol=3)
    return res


if __name__ == "__main__":
    main()
