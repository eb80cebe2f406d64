"""The two layouts of a hardware spec: the grouped one (sections a reader can
see, as `Hardware`'s groups) and the flat one of earlier versions, which
still loads (one note on stderr per file, `load_hardware`).

Grouped (specs/hardware/*.yaml; docs/reference/specs.md):

    name: h100-sxm
    chip:     {flops: {bf16: 989.4e12, ...}, units: 132, tile: [128, 128, 64]}
              # or a systolic array: array, cores, dataflow, clock_hz, vector_flops;
              # execution: kernels | {kind: dataflow, fabric_hops, clock_hz}
    memory:   [{name: sram, size, bandwidth}, {name: hbm, size, bandwidth}]
    network:  [{name: nvlink, domain, bandwidth, latency, topology, switch_reduction}, ...]
    power:    {tdp_w: 700, static_w: 105, pj_per_flop: {bf16: 0.3}}
    cost:     {price_usd: 30000, lifetime_years: 4, usd_per_kwh: 0.08, pue: 1.2}
    host:     {name: ..., clock_hz: 3.8e9}     # the serving host CPU; an offload
              # target adds flops, bandwidth, latency and offload: [operators]
    efficiency: {compute: 0.7, ...}   # optional, fitted values (calibration keys)
    software: rocm                    # optional, the engine part the chip always runs

`FLAT_KEYS` says where each flat key went; `flat_layout` turns a grouped spec
into the flat mapping the section parsers (hardware_spec, compute_spec,
software_spec) read, and `grouped_message` names the grouped key in their
one-line errors.
"""

import re
import sys

from jaxplat.specs import SpecError, check_keys

SECTIONS = {
    "chip": ("flops", "units", "tile", "array", "cores", "dataflow", "clock_hz", "vector_flops", "exp_rate",
             "execution"),
    "power": ("tdp_w", "static_w", "pj_per_flop"),
    "cost": ("price_usd", "lifetime_years", "usd_per_kwh", "pue"),
    "host": ("name", "clock_hz", "flops", "bandwidth", "latency", "offload"),
}
GROUPED_KEYS = ("name", "description", "chip", "memory", "network", "power", "cost", "host", "efficiency", "software")
# Flat key (prefix) -> grouped key (prefix), most specific first.
FLAT_KEYS = {
    "compute.host": "host", "compute.offload": "host.offload", "compute": "chip", "flops": "chip.flops",
    "execution": "chip.execution", "tdp_w": "power.tdp_w", "energy": "power", "price_usd": "cost.price_usd",
    "tco": "cost", "host_cpu": "host",
}
_FLAT_ONLY = ("flops", "compute", "execution", "tdp_w", "energy", "price_usd", "tco", "host_cpu")
_KEY = re.compile(r"(?<![\w.])(?:" + "|".join(  # a dotted key whole; a bare one where it is a key in the sentence
    re.escape(k) + (r"(?![\w])" if "." in k else r"(?=[.'\[:]| must| lists| needs| describes| is| has| \(|$)")
    for k in FLAT_KEYS) + ")")
_noted: set = set()


def is_flat(d: dict, src="hardware") -> bool:
    """Whether a hardware spec mapping uses the flat layout; a spec that mixes
    both layouts is refused, naming a key of each."""
    flat = [k for k in _FLAT_ONLY if k in d]
    grouped = [k for k in SECTIONS if k in d]
    if flat and grouped:
        raise SpecError(f"{src}: mixes the flat layout ({flat[0]}:) with sections ({grouped[0]}:); put "
                        f"{flat[0]} under {FLAT_KEYS[flat[0]].split('.')[0]}: (docs/reference/specs.md)")
    return bool(flat) or not grouped


def flat_layout(d: dict, src="hardware") -> dict:
    """The flat mapping of a hardware spec in either layout (a flat one as it is)."""
    if is_flat(d, src):
        return d
    check_keys(src, "", d, GROUPED_KEYS, required=("chip", "memory", "network", "power"))
    sec = {}
    for name, keys in SECTIONS.items():
        sec[name] = d.get(name) or {}
        check_keys(src, f"{name}.", sec[name], keys)
    chip, power, cost, host = sec["chip"], sec["power"], sec["cost"], sec["host"]
    out = {k: d[k] for k in ("name", "description", "memory", "network", "efficiency", "software") if k in d}
    out.update({k: chip[k] for k in ("flops", "execution") if k in chip})
    compute = {k: v for k, v in chip.items() if k not in ("flops", "execution")}
    target = {k: host[k] for k in ("flops", "bandwidth", "latency") if k in host}
    compute.update({"host": target} if target else {}, **({"offload": host["offload"]} if "offload" in host else {}))
    out.update({"compute": compute} if compute else {})
    cpu = {k: host[k] for k in ("name", "clock_hz") if k in host}
    out.update({"host_cpu": cpu} if cpu else {})
    out.update({k: power[k] for k in ("tdp_w",) if k in power})
    energy = {k: power[k] for k in ("static_w", "pj_per_flop") if k in power}
    out.update({"energy": energy} if energy else {})
    out.update({k: cost[k] for k in ("price_usd",) if k in cost})
    tco = {k: cost[k] for k in ("lifetime_years", "usd_per_kwh", "pue") if k in cost}
    out.update({"tco": tco} if tco else {})
    return out


def grouped_layout(d: dict) -> dict:
    """The grouped mapping of a flat hardware spec (a grouped one as it is):
    what `jaxplat codesign` writes and what the shipped specs were converted to."""
    if not is_flat(d):
        return d
    compute, en, tco = dict(d.get("compute") or {}), d.get("energy") or {}, d.get("tco") or {}
    chip = {**({"flops": d["flops"]} if "flops" in d else {}),
            **{k: v for k, v in compute.items() if k not in ("host", "offload")},
            **({"execution": d["execution"]} if "execution" in d else {})}
    host = {**(d.get("host_cpu") or {}), **(compute.get("host") or {}),
            **({"offload": compute["offload"]} if "offload" in compute else {})}
    out = {k: d[k] for k in ("name", "description") if k in d}
    out.update(chip=chip, memory=d.get("memory"), network=d.get("network"),
               power={**({"tdp_w": d["tdp_w"]} if "tdp_w" in d else {}), **en})
    cost = {**({"price_usd": d["price_usd"]} if "price_usd" in d else {}), **tco}
    out.update({"cost": cost} if cost else {}, **({"host": host} if host else {}))
    out.update({k: d[k] for k in ("efficiency", "software") if k in d})
    return out


def grouped_message(msg: str, src: str) -> str:
    """A section parser's one-line error with the grouped key names
    ('compute.units' -> 'chip.units', 'tdp_w' -> 'power.tdp_w')."""
    head = f"{src}: "
    if not msg.startswith(head):
        return msg
    return head + _KEY.sub(lambda m: FLAT_KEYS[m.group(0)], msg[len(head):])


def note_flat(path) -> None:
    """One note on stderr, once per file, that it uses the flat layout."""
    if str(path) in _noted:
        return
    _noted.add(str(path))
    print(f"note: {path} uses the flat hardware layout of earlier versions (flops:, compute:, tdp_w:, price_usd:, "
          "energy:, tco:, host_cpu: at the top); it loads as before. The grouped layout puts them under chip:, "
          "power:, cost:, host: (docs/reference/specs.md)", file=sys.stderr)
