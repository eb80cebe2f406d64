"""TP vs PP: every split of 8 chips into tensor x pipeline parallelism, latency
and throughput at batch 1, 4 and 16 (micro-batches = min(pp, batch), GPipe).

GPT-3 175B in fp8 (as GenZ's Sec. 5.B notebook, "Paper charts/Sec 5.B
Parallelism Strategies.ipynb", uses GPT-3) on 8 x H100 SXM (one NVLink node) and
on 8 of the paper's baseline NPUs (300 GB/s links, 2 µs), the QA use case (1000 in,
200 out: the chatbot's 4000 tokens exceed GPT-3's 2048-token window).

    .venv/bin/python experiments/paper/tp_vs_pp.py [--quick] [--out PNG]
"""

import _common as c

import jaxplat as jp

SPLITS = ((8, 1), (4, 2), (2, 4), (1, 8))


def main(argv=None):
    a = c.parser(__doc__, "tp_vs_pp").parse_args(argv)
    c.setup()
    batches = (1, 16) if a.quick else (1, 4, 16)
    model = jp.load_model("gpt-3-175b")
    chips = (("H100 SXM", jp.load_hardware("h100-sxm")), ("baseline NPU", c.npu()))
    configs, keys = [], []
    for hname, hw in chips:
        for b in batches:
            wl = c.workload("qa", "fp8", batch=b, beams=1)
            for tp, pp in SPLITS:
                configs.append((model, hw, jp.Parallel(tp=tp, pp=pp, microbatches=min(pp, b)), wl))
                keys.append((hname, b, tp, pp))
    r = c.evaluate_many(configs)
    res = {k: {m: r[m][i] for m in ("ttft", "tpot", "throughput", "comm_time", "fits", "feasible")}
           for i, k in enumerate(keys)}
    print("GPT-3 175B, fp8, QA (1000 in, 200 out), 8 chips, micro-batches = min(pp, batch)")
    rows = []
    for hname, _ in chips:
        for b in batches:
            for tp, pp in SPLITS:
                x = res[(hname, b, tp, pp)]
                rows.append([hname, f"{b}", f"TP{tp} x PP{pp}", c.ms(x["ttft"]), c.ms(x["tpot"]),
                             f"{x['throughput']:.4g} tok/s", f"{x['comm_time']:.3g} s",
                             "yes" if x["feasible"] else "no"])
    print(c.table(["chip", "batch", "split", "TTFT", "TPOT", "throughput", "comm (request)", "feasible"], rows,
                  "lrlrrrrl"))

    fig, axes = c.figure(1, 3, size=(14, 4.2))
    labels = [f"TP{tp}\nPP{pp}" for tp, pp in SPLITS]
    for (hname, _), ls in zip(chips, ("-", "--")):
        for j, b in enumerate(batches):
            for ax, m, scale in ((axes[0][0], "ttft", 1e3), (axes[0][1], "tpot", 1e3), (axes[0][2], "throughput", 1)):
                ax.plot(range(len(SPLITS)), [scale * res[(hname, b, tp, pp)][m] for tp, pp in SPLITS], ls=ls,
                        marker="o", ms=3, color=f"C{j}", label=f"{hname}, batch {b}")
    for ax, lab in zip(axes[0], ("TTFT (ms)", "TPOT (ms)", "throughput (output tokens/s)")):
        ax.set_xticks(range(len(SPLITS)), labels)
        ax.set_yscale("log")
        ax.set_ylabel(lab)
        ax.set_xlabel("split of 8 chips")
    c.save(fig, a.out, "TP vs PP, GPT-3 175B fp8 on 8 chips (solid: H100 SXM, dashed: baseline NPU)", axes[0][0], 3)
    return res


if __name__ == "__main__":
    main()
