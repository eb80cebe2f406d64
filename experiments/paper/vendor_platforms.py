"""Vendor-style platforms serving Llama-3.1-70B: wafer-scale SRAM (4 Cerebras
CS-3), GPU (8 H100 SXM, one NVLink node), a transformer ASIC (8 chips, assumed
numbers below) and a three-tier-memory dataflow chip (8 SambaNova SN40L: SRAM,
HBM, DDR). Latency, throughput, energy and cost per token at batch 1 and 32.

Chat use case (3000 in, 1000 out, 1 beam), bf16. Built-in specs in
specs/hardware/ (each number's source is in the YAML).

    .venv/bin/python experiments/paper/vendor_platforms.py [--quick] [--out PNG]
"""

import _common as c
import numpy as np

import jaxplat as jp
from jaxplat.model import hardware_from_dict

# A transformer-only ASIC in the style of Etched Sohu (announced June 2024: 144 GB
# HBM3E per chip, 8 per server; FLOP/s and bandwidth unpublished). All numbers
# below except the 144 GB are ASSUMED: 4x an H100's dense bf16 (a die of matrix
# units only), H200-class 4.8 TB/s HBM3E, NVLink-class 450 GB/s links, 8-chip
# domain, high efficiency for a fixed-function datapath, H100-class power and price.
ASIC = {"flops": {"bf16": 4 * 989.4e12},
        "memory": [{"name": "hbm", "size": 144e9, "bandwidth": 4.8e12}],
        "network": [{"name": "c2c", "domain": 8, "bandwidth": 450e9, "latency": 1e-6},
                    {"name": "ethernet", "domain": 4096, "bandwidth": 50e9, "latency": 5e-6}],
        "efficiency": {"compute": 0.9, "memory": 0.85, "network": 0.8}, "tdp_w": 700, "price_usd": 30000}

PLATFORMS = (("wafer-scale SRAM (4 x CS-3)", "cerebras-cs3-x4", 4),
             ("GPU (8 x H100 SXM)", "h100-sxm", 8),
             ("transformer ASIC (8, assumed)", ASIC, 8),
             ("3-tier dataflow (8 x SN40L)", "sambanova-sn40l", 8))


SHORT = ("wafer-scale\nSRAM\n4 x CS-3", "GPU\n8 x H100", "transformer\nASIC\n8 (assumed)", "3-tier\ndataflow\n8 x SN40L")


def main(argv=None):
    a = c.parser(__doc__, "vendor_platforms").parse_args(argv)
    c.setup()
    batches = (1,) if a.quick else (1, 32)
    model = jp.load_model("llama-3.1-70b")
    configs, keys = [], []
    for label, spec, tp in PLATFORMS:
        hw = hardware_from_dict(spec, src="transformer ASIC") if isinstance(spec, dict) else jp.load_hardware(spec)
        for b in batches:
            configs.append((model, hw, jp.Parallel(tp=tp), c.workload("chatbot", "bf16", batch=b, beams=1)))
            keys.append((label, b))
    r = c.evaluate_many(configs)
    res = {k: {m: r[m][i] for m in ("ttft", "tpot", "throughput", "energy_per_token_j", "cost_per_mtok_usd", "fits",
                                    "feasible")} for i, k in enumerate(keys)}
    print("Llama-3.1-70B, chat (3000 in, 1000 out), bf16")
    rows = [[label, f"{b}", c.ms(res[(label, b)]["ttft"]), c.ms(res[(label, b)]["tpot"]),
             f"{1 / res[(label, b)]['tpot']:.4g} tok/s", f"{res[(label, b)]['throughput']:.4g} tok/s",
             f"{res[(label, b)]['energy_per_token_j']:.3g} J", f"${res[(label, b)]['cost_per_mtok_usd']:.3g}",
             "yes" if res[(label, b)]["feasible"] else "no"] for label, _, _ in PLATFORMS for b in batches]
    print(c.table(["platform", "batch", "TTFT", "TPOT", "per user", "throughput", "energy/token", "USD/Mtok",
                   "feasible"], rows, "lrrrrrrrl"))

    fig, axes = c.figure(1, 4, size=(16, 4.4))
    x = np.arange(len(PLATFORMS))
    w = 0.8 / len(batches)
    for j, b in enumerate(batches):
        for ax, m, scale in ((axes[0][0], "ttft", 1e3), (axes[0][1], "tpot", 1e3), (axes[0][2], "throughput", 1),
                             (axes[0][3], "cost_per_mtok_usd", 1)):
            bars = ax.bar(x + (j - (len(batches) - 1) / 2) * w, [scale * res[(lab, b)][m] for lab, _, _ in PLATFORMS],
                          w, color=f"C{j}")
            ax.plot([], [], color=f"C{j}", lw=8, label=f"batch {b}")  # legend entry without the hatch
            for bar, (lab, _, _) in zip(bars, PLATFORMS):
                if not res[(lab, b)]["feasible"]:
                    bar.set_hatch("xx")
                    bar.set_alpha(0.5)
    for ax, lab in zip(axes[0], ("TTFT (ms)", "TPOT (ms)", "throughput (output tokens/s)", "cost (USD per M tokens)")):
        ax.set_xticks(x, SHORT, fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel(lab)
    c.save(fig, a.out, "Llama-3.1-70B on vendor-style platforms (chat, bf16; hatched: does not fit)", axes[0][0], 2)
    return res


if __name__ == "__main__":
    main()
