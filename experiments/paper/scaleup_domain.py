"""Scale-up domain size with optical scale-out: GPT-4 1.8T (fp8) on 64
B200-class chips whose fast (NVLink-class) domain holds 4 to 64 chips; beyond
it collectives cross an optical scale-out network.

Chip: specs/hardware/b200.yaml (180 GB HBM3e at 8 TB/s, 900 GB/s NVLink, 0.25 µs)
with the scale-up domain set to D; scale-out: 100 GB/s per chip per direction
(one 800 Gb/s optical port per chip) and 2 µs (ASSUMED, co-packaged optics class).
Splits of 64 chips: TP4 x EP16 and TP4 x EP4 x PP4. Chat use case, batch 1 and 64.

    .venv/bin/python experiments/paper/scaleup_domain.py [--quick] [--out PNG]
"""

import _common as c

import jaxplat as jp
from jaxplat.model import hardware_from_dict
from jaxplat.specs import read_yaml, resolve

DOMAINS = (4, 8, 16, 32, 64)
SPLITS = (("TP4 x EP16", {"tp": 4, "ep": 16}), ("TP4 x EP4 x PP4", {"tp": 4, "ep": 4, "pp": 4}))
OPTICAL = {"name": "optical", "domain": 65536, "bandwidth": 100e9, "latency": 2e-6}


def chip(domain: int) -> jp.Hardware:
    d = read_yaml(resolve("hardware", "b200"))
    d["network"] = [dict(d["network"][0], domain=domain), OPTICAL]
    return hardware_from_dict(d, src=f"b200, scale-up domain {domain}")


def main(argv=None):
    a = c.parser(__doc__, "scaleup_domain").parse_args(argv)
    c.setup()
    domains = DOMAINS[::2] if a.quick else DOMAINS
    batches = (1, 64)
    model = jp.load_model("gpt-4-1.8t")
    configs, keys = [], []
    for d in domains:
        hw = chip(d)
        for sname, deg in SPLITS:
            for b in batches:
                mb = min(deg.get("pp", 1), b)
                configs.append((model, hw, jp.Parallel(microbatches=mb, **deg),
                                c.workload("chatbot", "fp8", batch=b, beams=1)))
                keys.append((d, sname, b))
    r = c.evaluate_many(configs)
    res = {k: {m: r[m][i] for m in ("ttft", "tpot", "throughput", "comm_time", "feasible")} for i, k in enumerate(keys)}
    print("GPT-4 1.8T, fp8, chat (3000 in, 1000 out), 64 B200-class chips; scale-up domain D, optical beyond")
    rows = [[f"{d}", s, f"{b}", c.ms(res[(d, s, b)]["ttft"]), c.ms(res[(d, s, b)]["tpot"]),
             f"{res[(d, s, b)]['throughput']:.4g} tok/s", f"{res[(d, s, b)]['comm_time']:.3g} s",
             "yes" if res[(d, s, b)]["feasible"] else "no"] for s, _ in SPLITS for b in batches for d in domains]
    print(c.table(["domain", "split", "batch", "TTFT", "TPOT", "throughput", "comm (request)", "feasible"], rows,
                  "rlrrrrrl"))

    fig, axes = c.figure(1, 2, size=(11, 4.4))
    for i, (s, _) in enumerate(SPLITS):
        for j, b in enumerate(batches):
            for ax, m in ((axes[0][0], "ttft"), (axes[0][1], "tpot")):
                ax.plot(domains, [1e3 * res[(d, s, b)][m] for d in domains], marker="o", ms=3, color=f"C{i}",
                        ls=("-", "--")[j], label=f"{s}, batch {b}")
    c.log2_axes(axes[0], domains, [str(d) for d in domains], "scale-up domain (chips on NVLink-class links)",
                ("TTFT (ms)", "TPOT (ms)"))
    c.save(fig, a.out, "GPT-4 1.8T on 64 chips: growing the scale-up domain (optical scale-out beyond it)",
           axes[0][0], 2)
    return res


if __name__ == "__main__":
    main()
