"""Scaling hardware characteristics on the paper's baseline NPU: compute 1-12x,
memory bandwidth 1-8x, interconnect bandwidth 1-6x, link latency 2 µs -> 0.1 µs,
each alone; prefill (TTFT) and decode (TPOT) speed-up over the baseline.

GenZ (arXiv 2406.01698) Sec. 6.A-6.D; the GenZ repository's "Paper charts/Sec 6.*"
notebooks: Mixtral-8x7B and GPT-3 175B in FP8, batch 1, GenZ's use cases, on
the fewest power-of-two chips that hold weights + KV (tp = chips).

    .venv/bin/python experiments/paper/hw_scaling.py [--quick] [--out PNG]
"""


import _common as c

import jaxplat as jp

MODELS = (("mixtral-8x7b", "Mixtral-8x7B", 2), ("gpt-3-175b", "GPT-3 175B", 8))  # tp: fewest 40 GB chips (pow2)
KNOBS = (("compute", "peak FLOP/s", (1, 2, 4, 8, 12)),
         ("memory bandwidth", "HBM bandwidth", (1, 2, 4, 8)),
         ("interconnect bandwidth", "link bandwidth", (1, 2, 4, 6)),
         ("link latency", "link latency (µs)", (1, 2, 4, 8, 20)))  # 2 µs / s: 2, 1, 0.5, 0.25, 0.1 µs


def chip(knob: str, s: float) -> jp.Hardware:
    base = {"flops": 800e12, "mem": 40e9, "bw": 4e12, "icn": 300e9, "latency": 2e-6}
    key = {"compute": "flops", "memory bandwidth": "bw", "interconnect bandwidth": "icn"}.get(knob)
    if key:
        base[key] *= s
    else:
        base["latency"] /= s
    return c.npu(**base)


def main(argv=None):
    a = c.parser(__doc__, "hw_scaling").parse_args(argv)
    c.setup()
    cases = ("chatbot",) if a.quick else ("qa", "chatbot", "qa-rag", "summarization", "code-generation")
    knobs = KNOBS[:1] if a.quick else KNOBS
    configs, keys = [], []
    for name, _, tp in MODELS:
        model = jp.load_model(name)
        for case in cases:
            wl = c.workload(case, "fp8", batch=1)
            for knob, _, scales in knobs:
                for s in scales:
                    configs.append((model, chip(knob, s), jp.Parallel(tp=tp), wl))
                    keys.append((name, case, knob, s))
    r = c.evaluate_many(configs)
    res = {k: (r["ttft"][i], r["tpot"][i], r["fits"][i]) for i, k in enumerate(keys)}

    print("Baseline NPU: 800 TFLOP/s bf16 (1600 fp8), 40 GB HBM at 4 TB/s, 300 GB/s links, 2 µs; FP8, batch 1")
    for name, label, tp in MODELS:
        base = res[(name, "chatbot", "compute", 1)]
        print(f"\n{label} on {tp} chips, chatbot (3000 in, 1000 out, 2 beams): baseline TTFT {c.ms(base[0])}, "
              f"TPOT {c.ms(base[1])}, fits {bool(base[2])}")
        rows = []
        for knob, xlabel, scales in knobs:
            for s in scales[1:]:
                ttft, tpot, _ = res[(name, "chatbot", knob, s)]
                rows.append([knob, f"{s:g}x", f"{base[0] / ttft:.2f}x", f"{base[1] / tpot:.2f}x"])
        print(c.table(["knob", "scale", "prefill speed-up", "decode speed-up"], rows, "lrrr"))
    if len(cases) > 1:
        print("\nSpeed-up at the largest scale of each knob, every use case (prefill / decode):")
        rows = []
        for name, label, _ in MODELS:
            for case in cases:
                b = res[(name, case, "compute", 1)]
                rows.append([label, case] + [f"{b[0] / res[(name, case, k, s[-1])][0]:.2f} / "
                                             f"{b[1] / res[(name, case, k, s[-1])][1]:.2f}" for k, _, s in knobs])
        print(c.table(["model", "use case"] + [f"{k} {s[-1]:g}x" for k, _, s in knobs], rows, "llrrrr"))

    fig, axes = c.figure(1, len(knobs), size=(3.3 * len(knobs) + 1, 4.2))
    for ax, (knob, xlabel, scales) in zip(axes[0], knobs):
        lat = knob == "link latency"
        xs = [2.0 / s for s in scales] if lat else list(scales)
        top = 1.0
        for (name, label, _), color in zip(MODELS, ("tab:blue", "tab:red")):
            b = res[(name, "chatbot", "compute", 1)]
            for j, (phase, ls) in enumerate((("prefill", "-"), ("decode", "--"))):
                y = [b[j] / res[(name, "chatbot", knob, s)][j] for s in scales]
                top = max(top, *y)
                ax.plot(xs, y, ls=ls, marker="o", ms=3, color=color, label=f"{label} {phase}")
        if lat:
            ax.set_xscale("log")
            ax.set_xticks(xs, [f"{x:g}" for x in xs])
            ax.minorticks_off()
            ax.invert_xaxis()
        else:
            ax.plot(xs, xs, color="0.6", lw=0.8, ls=":", label="ideal (= scale)")
        ax.set_ylim(0.9, max(1.5, top * 1.15))
        ax.set_xlabel(xlabel if lat else f"{xlabel} / baseline")
        ax.set_ylabel("speed-up over baseline (x)")
        ax.set_title(knob)
    c.save(fig, a.out, "Scaling one NPU characteristic at a time (chatbot use case, FP8, batch 1)", axes[0][0])
    return res


if __name__ == "__main__":
    main()
