"""Generate the docs' reference sections from the code's own schema.

The spec reference (hardware, software, workload, study and calibration keys),
the CLI reference (every subcommand's argparse flags) and the calibration
report (the shipped fit in specs/calibration/default.yaml) are never typed by
hand: `docs/hooks.py` (a MkDocs hook) replaces a marker line
`<!-- gen:NAME -->` in a page with `render(NAME)` at build time, so they are
not kept in git and cannot go stale. To read them without MkDocs:

    python docs/gen_reference.py OUT_DIR     # writes OUT_DIR/{specs,cli,calibration}.md

A schema key with no description here makes `render` raise (a new key must be
documented); tests/test_docs.py builds the site, so CI fails on it.
"""

import argparse
import math
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

# Meanings of the keys whose tuples in the code carry none (hardware_layout.SECTIONS & co.).
HARDWARE_KEYS = {
    "name": "the chip's name (reports, top-k tables)",
    "description": "free text",
    "chip": "the chip's compute (keys below): peaks, a tensor-core chip's units and tile or systolic arrays, "
            "its execution",
    "memory": "memory levels, fastest first (list of mappings; keys below). A level named `sram` is on-chip. "
              "`size` in bytes: GPU datasheets' GB are binary (an \"80 GB\" H100 holds 80 GiB = 85.9e9 B)",
    "network": "network levels, innermost first (list of mappings; keys below)",
    "power": "board power and energy (keys below; `tdp_w` required)",
    "cost": "price and the cost of ownership's basis (keys below)",
    "host": "the serving host CPU and, for a chip that offloads operators, the offload target (keys below)",
    "efficiency": "FITTED efficiency parameters (table below), each a number or `{value, source}` saying where it "
                  "came from; a spec that leaves one out gets the shipped calibration's "
                  "(specs/calibration/default.yaml, with its fit's record)",
    "software": "the engine part the chip always runs (`rocm` on the AMD chips: every engine on it takes that "
                "part's calibration values)",
}
CHIP_KEYS = {
    "flops": "dense peak FLOP/s per dtype (`{bf16: 989e12, fp8: 1979e12}`); a dtype the chip lacks runs on the "
             "first listed unit its values are exact on (FP4 on FP8; FP8/INT8 on BF16/FP16; 16-bit on FP32), FP32/TF32 "
             "wider than every unit as 6/3 BF16 passes; may be left out when `array` gives the peak",
    "units": "SMs or CUs of a tensor-core chip (tile and wave quantization)",
    "tile": "a GEMM kernel's `[m, n, k]` tile (with `units`)",
    "array": "systolic array `[rows, cols]` (then `flops` may be left out)",
    "cores": "arrays per chip",
    "dataflow": "`ws`, `os` or `is` (weight, output, input stationary)",
    "clock_hz": "array clock",
    "vector_flops": "FLOP/s of the element-wise (vector) unit",
    "exp_rate": "exponentials/s of the special-function units (attention's softmax); default: listed fp32 FLOP/s / 16",
    "execution": "`{kind: dataflow, fabric_hops, clock_hz}` for chips that run as dataflow (weights resident, "
                 "layers pipelined, no launches; Cerebras, Groq, SambaNova); default `kernels`",
}
POWER_KEYS = {
    "tdp_w": "board power in W: static power is a share of it, and a phase whose average power would "
             "pass chips x TDP runs slower until it does not (`power_throttle`)",
    "static_w": "W drawn whatever the chip does (default 15% of `tdp_w`)",
    "pj_per_flop": "pJ per FLOP per dtype (defaults by process node in `jaxplat/model/hardware_spec.py`, with "
                   "sources); per-level `pj_per_bit` sits on the memory and network levels",
}
COST_KEYS = {
    "price_usd": "price per chip in USD (the capital part of $/Mtok)",
    "lifetime_years": "years the price is amortized over", "usd_per_kwh": "facility electricity price",
    "pue": "power usage effectiveness (facility / IT energy, at least 1)",
}
HOST_KEYS = {
    "name": "the serving host CPU's name",
    "clock_hz": "its maximum clock, Hz: its per-sequence work scales with the inverse, the reference being the DGX "
                "H100's 3.8 GHz Xeon 8480C",
    "flops": "offload target's FLOP/s", "bandwidth": "link to the offload target, bytes/s",
    "latency": "seconds per offloaded call",
    "offload": "operators (or groups) that run on the offload target, e.g. `[logit, softmax, attend]`",
}
MEMORY_KEYS = {
    "name": "level name (`sram` = on-chip; `hbm`, `dram`, ...)",
    "size": "capacity in bytes",
    "bandwidth": "bytes/s",
    "pj_per_bit": "access energy (default by level kind)",
}
NETWORK_KEYS = {
    "name": "level name (`nvlink`, `infiniband`, `ici`, ...)",
    "domain": "chips this level connects",
    "bandwidth": "bytes/s per chip per direction",
    "latency": "seconds per message step (the alpha of the alpha-beta model)",
    "topology": "one of the topologies below (default `switch`)",
    "switch_reduction": "`true` where the switch reduces in the network (NVLink SHARP, NVSwitch 3 and later): an "
                        "all-reduce may run NCCL's NVLS algorithm",
    "pj_per_bit": "energy per bit sent",
}
TOPOLOGY_MEANINGS = {
    "switch": "every chip one hop from every other through a switch",
    "ring": "a ring; ring algorithms only",
    "torus2d": "2-D torus (TPU v5e): ring algorithms dimension by dimension",
    "torus3d": "3-D torus (TPU v4/v5p)",
    "mesh2d": "2-D mesh without wrap-around links",
    "fully_connected": "each chip linked to each peer by its own link; the level's bandwidth is their sum "
                       "(AMD Infinity Fabric)",
}
DATAFLOW_KEYS = {
    "kind": "`kernels` (default) or `dataflow`",
    "fabric_hops": "fabric hops an operator's data crosses (dataflow chips)",
    "clock_hz": "fabric clock (each hop one cycle)",
}
WORKLOAD_KEYS = {
    "name": "the use case's name", "description": "free text",
    "batch": "sequences per replica (static batch)", "prompt": "prompt tokens", "output": "output tokens",
    "beams": "beams per sequence (beam search; serving modes drop them with a warning)",
    "dtype": "one dtype, or `{weights, activations, kv, experts}` (keys below)",
    "slo": "`{ttft, tpot}` in seconds",
}
DTYPE_KEYS = {
    "weights": "stored weight dtype (`fp4` = NVFP4, 4.5 bits with its scales; `mxfp4` 4.25 bits)",
    "activations": "activation dtype (the GEMMs' compute dtype)",
    "kv": "KV-cache dtype",
    "experts": "routed experts' weights when a checkpoint stores them apart (gpt-oss: `mxfp4`)",
}
SLO_KEYS = {"ttft": "time to first token, s", "tpot": "time per output token, s"}
STUDY_KEYS = {
    "name": "the study's name", "description": "free text",
    "models": "model names or paths (may mix architectures)",
    "workloads": "workload names or paths",
    "hardware": "a chip, or a list of chips (a categorical axis `hardware`; same structure)",
    "options": "`Options` fields (profile, smooth, ...)",
    "axes": "axis name -> list of values or a range (axes and ranges below)",
    "constraints": "keys below; a sweep applies the workload's SLOs unless it says `ttft: none, tpot: none`",
    "objective": "`{maximize: METRIC}` or `{minimize: METRIC}` (metrics below)",
    "pareto": "two metrics for the Pareto front",
    "top_k": "rows in the top-k table (of each group_by value when group_by is set)",
    "group_by": "an axis each of whose values keeps its own top_k best and per-axis summaries",
    "engine": "the sweep engine's settings (keys below; not a serving engine)",
    "price": "`fixed` (the base chip's price) or `technology` (default when a priced axis varies)",
    "technology": "the technology model pricing hypothetical chips (`n5`, specs/technology/)",
    "software": "the software stack of every configuration (a name in specs/software/)",
}
CONSTRAINT_KEYS = {
    "max_chips": "at most this many chips per deployment",
    "ttft": "seconds, `workload` (its SLO) or `none`",
    "tpot": "seconds, `workload` or `none`",
    "max_memory_fraction": "at most this share of the memory capacity",
}
ENGINE_KEYS = {
    "block": "configurations per block", "blocks_per_step": "blocks per compiled step",
    "pareto_points": "points kept on the Pareto front", "histogram_bins": "bins of the objective's histogram",
    "histogram_range": "its range", "fast_compile": "`true`/`false`: cheaper XLA compile (about a fifth slower)",
}
RANGE_KEYS = {
    "linear": "`[lo, hi]` evenly spaced", "log": "`[lo, hi]` evenly spaced in log", "pow2": "`[lo, hi]` powers of two",
    "count": "how many values (with `linear` or `log`)",
}
CODESIGN_KEYS = {
    "name": "the study's name", "description": "free text",
    "model": "one model", "workload": "one workload (its SLOs are the constraints; inference only)",
    "task": "`infer` (default) or `train` (implied by a training objective): what the chip is designed for",
    "train": "training only: the run `{seq, global_batch, dtype, tokens, schedule, max_days}` (tokens per sequence, "
             "sequences per step, `bf16`/`fp8`/`fp4`/`int8`, tokens to train on, `1f1b`/`gpipe`, a deadline in days)",
    "technology": "technology node pricing the chip (`n5`)", "hbm": "HBM generation (`hbm3e`)",
    "base": "the chip whose other numbers the designed chip keeps (default `h100-sxm`)",
    "objective": "what to minimize (objectives below)", "budget_usd": "a price cap per chip",
    "profile": "`default` or `genz`",
    "software": "the software stack the designed chips run (else the base chip's default)",
    "params": "chip parameter -> `[lo, hi]` (or a number: fixed); parameters below",
    "candidates": "parallelism and batch candidates searched discretely (`tp`, `pp`, `ep`, `dp`, `batch`; training: "
                  "`chips` (required), `tp`, `pp`, `vp`, `cp`, `ep`, `micro_batch`, `recompute`, `zero`)",
    "optimizer": "`{starts, steps, seed}` of the gradient search",
    "grid": "points per parameter of the grid oracle the result is checked against",
}
CALIBRATION_KEYS = {
    "parameters": "global efficiency parameters", "chips": "per-chip parameters",
    "engines": "per-engine parameters (`--engine NAME`)", "fit": "the fit's record (errors, identification)",
    "description": "the command that made it", "software": "the software stack its rows were predicted with",
}
TCO_DEFAULTS = ("lifetime_years", "usd_per_kwh", "pue")


def _table(header, rows) -> str:
    esc = [[str(c).replace("|", "\\|").replace("\n", " ") for c in r] for r in rows]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in esc]
    return "\n".join(lines) + "\n"


def _keys(keys, meanings: dict, what: str, required=()) -> str:
    missing = [k for k in keys if k not in meanings]
    if missing:
        raise KeyError(f"docs/gen_reference.py: {what} key(s) {', '.join(missing)} have no description; add them")
    return _table(["key", "meaning"], [[f"`{k}`" + (" (required)" if k in required else ""), meanings[k]]
                                       for k in keys])


def _num(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def render_specs() -> str:
    from jaxplat.design import codesign as cd
    from jaxplat.design import spaces as sp
    from jaxplat.design.codesign_train import TRAIN_OBJECTIVES
    from jaxplat.model import hardware_spec as hs
    from jaxplat.model import software_spec as ss
    from jaxplat.model import workload_spec as ws
    from jaxplat.model.efficiency_spec import PARAMS
    from jaxplat.model.hardware import FLAT_NAMES, TOPOLOGIES
    from jaxplat.model.hardware_layout import FLAT_KEYS, GROUPED_KEYS, SECTIONS
    from jaxplat.search import study as st

    out = ["## Hardware (`specs/hardware/*.yaml`)\n",
           "Sections (`jaxplat/model/hardware_layout.py`), each one group of the `Hardware` pytree:\n",
           _keys(GROUPED_KEYS, HARDWARE_KEYS, "hardware", ("chip", "memory", "network", "power")),
           "\n### `chip:`\n", _keys(SECTIONS["chip"], CHIP_KEYS, "chip"),
           "\n`chip.execution:`\n\n", _keys(ss._DATAFLOW_KEYS, DATAFLOW_KEYS, "execution"),
           "\n### `memory:` levels\n", _keys(hs._MEM_KEYS, MEMORY_KEYS, "memory", hs._MEM_KEYS[:3]),
           "\n### `network:` levels\n",
           _keys(hs._NET_KEYS, NETWORK_KEYS, "network", ("domain", "bandwidth", "latency")),
           "\n### Topologies (`network[i].topology`)\n", _keys(TOPOLOGIES, TOPOLOGY_MEANINGS, "topology"),
           "\n### `power:`\n", _keys(SECTIONS["power"], POWER_KEYS, "power", ("tdp_w",)),
           "\n### `cost:` and its defaults\n", _keys(SECTIONS["cost"], COST_KEYS, "cost"), "\n",
           _table(["key", "default", "source"], [
               ["`lifetime_years`", _num(hs.DEFAULT_LIFETIME_YEARS), "assumed; a common depreciation period for AI "
                                                                     "servers (4-6 years)"],
               ["`usd_per_kwh`", _num(hs.DEFAULT_USD_PER_KWH), "US industrial average (EIA Electric Power Monthly)"],
               ["`pue`", _num(hs.DEFAULT_PUE), "assumed modern AI data centre (facility / IT energy, at least 1)"]]),
           "\n### `host:`\n", _keys(SECTIONS["host"], HOST_KEYS, "host"),
           "\n### The flat layout of earlier versions\n",
           "Spec files with the top-level keys below still load (one note on stderr per file); each key moved:\n\n",
           _table(["flat key", "grouped key"], [[f"`{k}`", f"`{v}`"] for k, v in FLAT_KEYS.items()]),
           "\n### The `Hardware` pytree\n",
           "`hw.GROUP.FIELD` in SI units (`jaxplat/model/hardware.py`); the flat names of earlier versions stay "
           "readable and `replace(hw, mem_bw=...)` routes them to their group.\n\n",
           _table(["group", "field", "flat name"], [[f"`{g}`", f"`{f}`", f"`{n}`"]
                                                   for n, (g, f) in FLAT_NAMES.items()]),
           "\n### `efficiency:` parameters (`jaxplat/model/efficiency_spec.py` `PARAMS`)\n",
           "Fractions lie in (0, 1]; times are seconds. Neutral values are ideal kernels.\n\n",
           _table(["key", "Hardware field", "neutral", "unit", "meaning"],
                  [[f"`{k}`", f"`{f}`", _num(n), u, m] for k, (f, n, u, m) in PARAMS.items()]),
           "\n## Software stacks (`specs/software/*.yaml`)\n",
           "Every key is `{value: number, source: text}` and required (`jaxplat/model/software_spec.py` "
           "`SOFTWARE_KEYS`); `name` and `description` besides.\n\n",
           _table(["key", "unit", "bound", "meaning"],
                  [[f"`{k}`", u, f"[{_num(lo)}, {_num(hi)}]", m] for k, (_, u, (lo, hi), m) in
                   ss.SOFTWARE_KEYS.items()]),
           "\n### Shipped stacks\n", _software_values(ss.SOFTWARE_KEYS),
           "\n## Workloads (`specs/workloads/*.yaml`)\n", _keys(ws._WL_KEYS, WORKLOAD_KEYS, "workload"),
           "\n### Shipped use cases\n", _workload_values(),
           "\n`dtype:` as a mapping\n\n", _keys(ws._DTYPE_KEYS, DTYPE_KEYS, "workload dtype"),
           "\n`slo:`\n\n", _keys(ws._SLO_KEYS, SLO_KEYS, "slo"),
           "\n## Studies (`specs/studies/*.yaml`, `jaxplat/search/study.py`)\n",
           _keys(st._STUDY_KEYS, STUDY_KEYS, "study"),
           "\n### Axes\n",
           _table(["axis", "group", "unit", "meaning"],
                  [[f"`{k}`", a.group, a.unit, a.doc]
                   for k, a in st.AXIS_KINDS.items()]),
           "\nPriced axes (with `price: technology` the technology model prices every point): "
           + ", ".join(f"`{a}`" for a in st.PRICED_AXES) + ".\n",
           "\n### Ranges (an axis given as a mapping)\n", _keys(st._RANGE_KEYS, RANGE_KEYS, "range"),
           "\n### `constraints:`\n", _keys(st._CONSTRAINT_KEYS, CONSTRAINT_KEYS, "constraint"),
           "\n### Metrics (objective, Pareto)\n",
           _table(["metric", "better", "unit"], [[f"`{k}`", b, u] for k, (_, b, u) in st.METRICS.items()]),
           "\n### `engine:` (sweep engine)\n", _keys(st._ENGINE_KEYS, ENGINE_KEYS, "study engine"),
           "\n## Co-design studies (`specs/studies/codesign-*.yaml`, `jaxplat/design/`)\n",
           _keys(_codesign_keys(), CODESIGN_KEYS, "codesign study"),
           "\nObjectives: " + ", ".join(f"`{o}`" for o in cd.OBJECTIVES) + "; training: "
           + ", ".join(f"`{o}`" for o in TRAIN_OBJECTIVES) + " (USD or days to train `train.tokens`).\n\n",
           _table(["parameter", "unit"], [[f"`{k}`", u] for k, u in sp.UNITS.items()]),
           "\n## Calibration files (`specs/calibration/*.yaml`)\n",
           _keys(_calibration_keys(), CALIBRATION_KEYS, "calibration")]
    return "".join(out)


def _codesign_keys():
    """The co-design study loader's keys, wherever the loader lives."""
    import importlib

    for name in ("jaxplat.design.codesign_study", "jaxplat.design.codesign"):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        if hasattr(module, "_STUDY_KEYS"):
            return module._STUDY_KEYS
    raise KeyError("docs/gen_reference.py: no _STUDY_KEYS in jaxplat.design.codesign(_study)")


def _calibration_keys():
    from jaxplat.model.efficiency_spec import CALIBRATION_KEYS as keys
    return keys


def _software_values(keys) -> str:
    files = sorted((ROOT / "specs" / "software").glob("*.yaml"))
    specs = {f.stem: yaml.safe_load(f.read_text()) for f in files}
    rows = [[f"`{k}`"] + [_num(float(specs[n][k]["value"])) for n in specs] for k in keys]
    return _table(["key", *[f"`{n}`" for n in specs]], rows)


def _dtype_text(dt) -> str:
    if isinstance(dt, dict):
        return "/".join(str(dt[k]) for k in ("weights", "activations", "kv", "experts") if k in dt)
    return str(dt)


def _workload_values() -> str:
    rows = []
    for f in sorted((ROOT / "specs" / "workloads").glob("*.yaml")):
        d = yaml.safe_load(f.read_text())
        slo = d.get("slo") or {}
        rows.append([f"`{f.stem}`", d.get("batch", ""), d.get("prompt", ""), d.get("output", ""), d.get("beams", 1),
                     _num(float(slo["ttft"])) if "ttft" in slo else "", _num(float(slo["tpot"])) if "tpot" in slo else "",
                     _dtype_text(d.get("dtype", ""))])
    return _table(["workload", "batch", "prompt", "output", "beams", "TTFT SLO (s)", "TPOT SLO (s)", "dtype"], rows)


def _plain(text: str) -> str:
    """Help text as literal markdown: no emphasis from `*`, no HTML from `<`."""
    return text.replace("\\", "\\\\").replace("*", "\\*").replace("<", "&lt;")


def _argparse_rows(parser) -> list:
    rows = []
    for a in parser._actions:
        if isinstance(a, argparse._HelpAction) or a.help == argparse.SUPPRESS:
            continue
        flag = ", ".join(f"`{o}`" for o in a.option_strings) or f"`{a.dest}` (positional)"
        if a.choices and not isinstance(a, argparse._SubParsersAction):
            flag += " {" + ", ".join(str(c) for c in a.choices) + "}"
        elif a.metavar and a.option_strings:
            flag += f" {a.metavar if isinstance(a.metavar, str) else ' '.join(a.metavar)}"
        default = "" if a.default in (None, argparse.SUPPRESS, False) else f"`{a.default}`"
        text = (a.help or "") % {"default": a.default, "prog": parser.prog} if a.help else ""
        rows.append([flag, default, _plain(text)])
    return rows


def render_cli() -> str:
    from jaxplat.cli.app import COMMANDS, build_parser

    out = []
    for name in COMMANDS:
        parser = build_parser(name)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        if name not in sub.choices:
            continue
        p = sub.choices[name]
        p.prog = f"jaxplat {name}"
        out += [f"## `jaxplat {name}`\n\n", _plain((p.description or "").strip()) + "\n\n",
                _table(["flag", "default", "meaning"], _argparse_rows(p)), "\n"]
    return "".join(out)


def _pct(x) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def _held_out_tables(fit: dict) -> list:
    """The `fit.validation` / `fit.test` blocks (experiments/calibration_check.py --write): one table per role."""
    titles = {"validation": "Validation rows of data/measured/inference_2026-12.csv (variants were chosen on them)",
              "test": "Test rows of data/measured/inference_2026-12.csv (predicted once, after the fit was frozen)"}
    out = []
    for role, title in titles.items():
        stacks = fit.get(role) or {}
        if not stacks:
            continue
        rows = [[f"`{stack}`", cat, f"{_pct(e['median_abs'])} / {100 * e['median_signed']:+.1f}% (n={e['n']})"]
                for stack, cats in stacks.items() for cat, e in cats.items()]
        note = ("Stacks: `own` = the calibration's fitted stack and its engines' values, `default` = "
                "graph-captured with the global values (what `estimate` gives). Static batches are judged on "
                "end-to-end latency.\n\n")
        out += [f"### {title}\n\n", note, _table(["stack", "rows", "median |error| / signed"], rows), "\n"]
    return out


def render_calibration() -> str:
    path = ROOT / "specs" / "calibration" / "default.yaml"
    text = path.read_text()
    header = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("#")]
    made = next((ln for ln in header if ln.startswith("Made ")), "")
    flags = next((ln for ln in header if ln.startswith("Flags")), "")
    d = yaml.safe_load(text)
    fit = d["fit"]
    cols = [("before", "before the fit"), ("fit", "fit (rows it saw)"), ("held_out_rows", "rows outside the fit"),
            ("leave_one_hardware_out", "leave one chip out"), ("leave_one_model_out", "leave one model out")]
    kinds = sorted({k for c, _ in cols for k in fit.get(c, {})}, key=lambda k: (k == "all", k))
    rows = []
    for k in kinds:
        row = [k]
        for c, _ in cols:
            e = fit.get(c, {}).get(k)
            row.append("" if not e or not e.get("n") else
                       f"{_pct(e['median_abs'])} / {100 * e['median_signed']:+.1f}% (n={e['n']})")
        rows.append(row)
    out = [f"Generated from `specs/calibration/default.yaml` (its header and `fit:` block). {made}\n\n",
           f"The fit saw {fit.get('fitted_rows')} of {fit.get('rows')} rows; loss {fit.get('loss', 0):.4g} "
           f"after {fit.get('steps')} steps. Software stack of its rows: `{d.get('software', '')}`.\n\n",
           "### Errors: median |predicted / measured - 1| / median signed (rows)\n\n",
           _table(["measurement", *[t for _, t in cols]], rows),
           f"\nPer-chip MLPerf offline throughput ratios, leave one chip out: median |error| "
           f"{_pct(fit.get('chip_ratio_median_abs'))}.\n\n",
           *_held_out_tables(fit),
           "### Fitted values\n\n",
           _table(["parameter", "value", "loss change at x1.2 or /1.2 (identification)"],
                  [[f"`{k}`", _num(v), _pct(fit.get("identification", {}).get(k))]
                   for k, v in d.get("parameters", {}).items()]),
           "\n### Engines (`--engine NAME`: that engine release's values where they differ from the global ones)\n\n",
           _table(["engine", "values"], [[f"`{e}`", ", ".join(f"{k} {_num(v)}" for k, v in vals.items())]
                                         for e, vals in d.get("engines", {}).items()])]
    if flags:
        out.append(f"\n{flags}\n")
    return "".join(out)


RENDERERS = {"specs": render_specs, "cli": render_cli, "calibration": render_calibration}


def render(name: str) -> str:
    """The markdown of section `name` (a key of RENDERERS), a blank line after each heading."""
    return re.sub(r"^(#+ .*)\n(?!\n)", r"\1\n\n", RENDERERS[name](), flags=re.M)


def main(argv=None) -> int:
    out = Path((argv or sys.argv[1:] or ["docs-generated"])[0])
    out.mkdir(parents=True, exist_ok=True)
    for name in RENDERERS:
        (out / f"{name}.md").write_text(render(name))
        print(out / f"{name}.md")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
