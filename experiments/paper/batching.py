"""Batching, beams and prompt length: how TTFT, TPOT and throughput scale.

Llama-3.1-70B on 8 x H100 SXM (tp=8), bf16, GenZ's chatbot use case (3000 in,
1000 out) with one of batch (1-256), beams (1-8) or prompt length (1k-64k)
changed at a time (others: batch 1, 1 beam, 3000-token prompt).

    .venv/bin/python experiments/paper/batching.py [--quick] [--out PNG]
"""

import _common as c

import jaxplat as jp

AXES = (("batch", (1, 4, 16, 64, 256)), ("beams", (1, 2, 4, 8)),
        ("prompt", (1024, 4096, 16384, 65536)))


def main(argv=None):
    a = c.parser(__doc__, "batching").parse_args(argv)
    c.setup()
    axes_ = tuple((k, v[:2]) for k, v in AXES) if a.quick else AXES
    model, hw, par = jp.load_model("llama-3.1-70b"), jp.load_hardware("h100-sxm"), jp.Parallel(tp=8)
    configs, keys = [], []
    for axis, values in axes_:
        for v in values:
            ch = {"batch": 1, "beams": 1, "prompt": 3000}
            ch[axis] = v
            configs.append((model, hw, par, c.workload("chatbot", "bf16", **ch)))
            keys.append((axis, v))
    r = c.evaluate_many(configs)
    res = {k: {m: r[m][i] for m in ("ttft", "tpot", "throughput", "kv_bytes", "fits")} for i, k in enumerate(keys)}
    print("Llama-3.1-70B, 8 x H100 SXM (tp=8), bf16, 1000 output tokens; one knob at a time")
    for axis, values in axes_:
        b = res[(axis, values[0])]
        rows = [[f"{v:g}", c.ms(res[(axis, v)]["ttft"]), c.ms(res[(axis, v)]["tpot"]),
                 f"{res[(axis, v)]['throughput']:.4g} tok/s", f"{res[(axis, v)]['throughput'] / b['throughput']:.2f}x",
                 f"{res[(axis, v)]['tpot'] / b['tpot']:.2f}x", f"{res[(axis, v)]['kv_bytes'] / c.GB:.3g} GB",
                 "yes" if res[(axis, v)]["fits"] else "no"] for v in values]
        print(f"\n{axis}")
        print(c.table([axis, "TTFT", "TPOT", "throughput", "throughput / first", "TPOT / first", "KV per chip",
                       "fits"], rows))

    fig, axes = c.figure(1, len(axes_), size=(4.2 * len(axes_), 4.2))
    for ax, (axis, values) in zip(axes[0], axes_):
        b = res[(axis, values[0])]
        ys = []
        for m, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("throughput", "throughput")):
            ys += [res[(axis, v)][m] / b[m] for v in values]
            ax.plot(values, ys[-len(values):], marker="o", ms=3, label=label)
        ax.set_xscale("log", base=2)
        if max(ys) / min(ys) > 3:  # a narrow range reads better on a linear axis
            ax.set_yscale("log")
        ax.set_xticks(values, [f"{v:g}" for v in values])
        ax.minorticks_off()
        ax.set_xlabel(f"{axis}" + (" (tokens)" if axis == "prompt" else ""))
        ax.set_ylabel(f"relative to {axis} = {values[0]:g} (x)")
        ax.set_title(f"{axis}: TTFT {c.ms(b['ttft'])}, TPOT {c.ms(b['tpot'])} at {values[0]:g}", fontsize=9)
    c.save(fig, a.out, "Batch, beams, prompt length: Llama-3.1-70B on 8 H100 (tp=8), bf16", axes[0][0], 3)
    return res


if __name__ == "__main__":
    main()
