"""Hardware spec (YAML) -> `Hardware`: validation, defaults for energy and
TCO numbers a spec leaves out."""

import functools

import numpy as np

from jaxplat.model.compute_spec import compute_fields
from jaxplat.model.efficiency_spec import Calibration, default_calibration, efficiency_fields
from jaxplat.model.hardware import MAX_MEM_LEVELS, MAX_NET_LEVELS, TOPOLOGIES, Hardware, hardware_from_fields
from jaxplat.model.hardware_layout import flat_layout, grouped_message, is_flat, note_flat
from jaxplat.model.software_spec import Software, default_software, execution_fields, load_software
from jaxplat.specs import SpecError, check_keys, choice, dtype_name, number, read_yaml, resolve
from jaxplat.specs.units import DTYPE_FALLBACK, DTYPES, EMULATION_PASSES, J_PER_KWH, SECONDS_PER_YEAR

# Defaults when a hardware spec gives no `tco:` block.
DEFAULT_LIFETIME_YEARS = 4.0  # assumed; a common depreciation period for AI servers (4-6 years)
DEFAULT_USD_PER_KWH = 0.08    # US industrial average ~8 c/kWh (EIA Electric Power Monthly, 2023-24)
DEFAULT_PUE = 1.2             # assumed modern AI data centre; Uptime Institute 2023 survey average is ~1.58


# ------------------------------------------------------------------ TCO


# J per FLOP by dtype at 4-5 nm, at the chip: the multiply-add (Horowitz, ISSCC 2014, 45 nm: fp16
# multiply 1.1 pJ + add 0.4 pJ, fp32 3.7 + 0.9 pJ, int8 0.2 + 0.03 pJ per 2 FLOPs; x0.4 to 5 nm, assumed;
# narrower dtypes roughly halve a MAC array's energy, assumed) times what delivering its operands costs
# besides (register files, shared memory, clock tree). That factor, 8/3, puts an H100 SXM at its 700 W
# limit running large BF16 GEMMs at 0.75 of peak (the rate DeepGEMM's kernel rows pin, efficiency.compute):
# (700 - 105 W static) / (0.75 x 989 TFLOP/s) = 0.80 pJ/FLOP, as H100s run them power-limited (He,
# "Strangely, matrix multiplications on GPUs run faster when given predictable data", 2024) and train at
# about their TDP (Latif et al., "Empirical measurements of AI training power demand on a GPU-accelerated
# node", IEEE Access 2025: 8-GPU H100 node, 8.4 kW).
_MAC_PJ_PER_FLOP = {
    "fp32": 1.0, "tf32": 0.5, "bf16": 0.3, "fp16": 0.3, "fp8": 0.15, "int8": 0.1, "fp4": 0.08, "int4": 0.05,
}
OPERAND_DELIVERY = 8.0 / 3.0
DEFAULT_J_PER_FLOP = {dt: pj * OPERAND_DELIVERY * 1e-12 for dt, pj in _MAC_PJ_PER_FLOP.items()}
# J per byte moved, by memory kind (matched on the level's name).
DEFAULT_J_PER_BYTE_MEM = {
    # Large on-chip SRAM incl. wires: ~0.2 pJ/bit (Horowitz 2014: 8 kB SRAM 64-bit
    # read 10 pJ at 45 nm = 0.16 pJ/bit; MB-scale arrays pay more wire). Estimate.
    "sram": 1.6e-12,
    # HBM2: ~3.9 pJ/bit at the interface (O'Connor et al., "Fine-grained DRAM",
    # MICRO 2017); HBM3/3e are quoted near the same figure. 3.9 pJ/bit x 8.
    "hbm": 31.2e-12,
    # Off-package DDR5 / LPDDR / CXL: ~15 pJ/bit incl. PHY and controller (assumed).
    "dram": 120e-12,
}
# J per byte sent per chip, by network level: scale-up (NVLink-class SerDes
# plus one switch hop, ~8 pJ/bit, assumed) and scale-out (NIC, optics and
# switches, ~20 pJ/bit, assumed).
DEFAULT_J_PER_BYTE_NET = (64e-12, 160e-12)
# Static (leakage + idle) power as a fraction of TDP when the spec gives none:
# an idle H100 SXM draws ~70-100 W of its 700 W (nvidia-smi, common reports). Assumed 0.15.
DEFAULT_STATIC_FRACTION = 0.15


def hardware_energy_fields(d: dict, src="hardware") -> dict:
    """`Hardware` energy fields from a raw hardware spec dict, defaults filled.

    Reads the optional `energy: {pj_per_flop: {dtype: pJ}, static_w: W}` block
    and the optional `pj_per_bit` of each memory and network level. Memory
    levels map to fields as `hardware_from_dict` places them: a first level
    named 'sram' is the on-chip SRAM (and also main memory on an SRAM-only chip).
    """
    en = d.get("energy", {}) or {}
    if not isinstance(en, dict):
        raise SpecError(f"{src}: energy must be a mapping with keys pj_per_flop, static_w")
    check_keys(src, "energy.", en, ("pj_per_flop", "static_w"))
    pj = en.get("pj_per_flop", {}) or {}
    if not isinstance(pj, dict):
        raise SpecError(f"{src}: energy.pj_per_flop must map dtypes to pJ per FLOP, e.g. {{bf16: 0.3}}")
    for k in pj:
        if k not in DTYPES:
            raise SpecError(f"{src}: energy.pj_per_flop has unknown dtype {k!r}; allowed: {', '.join(DTYPES)}")
    flop = [(number(src, f"energy.pj_per_flop.{dt}", pj[dt]) * 1e-12 if dt in pj else DEFAULT_J_PER_FLOP[dt])
            for dt in DTYPES]

    def level_energy(kind, i, lv, default):
        if isinstance(lv, dict) and "pj_per_bit" in lv:
            return number(src, f"{kind}[{i}].pj_per_bit", lv["pj_per_bit"], allow_zero=True) * 8e-12
        return default

    levels = [lv if isinstance(lv, dict) else {} for lv in d.get("memory") or []]
    mem = [level_energy("memory", i, lv, DEFAULT_J_PER_BYTE_MEM[mem_kind(str(lv.get("name", "")))])
           for i, lv in enumerate(levels)]
    e_sram = DEFAULT_J_PER_BYTE_MEM["sram"]
    if levels and str(levels[0].get("name")) == "sram":
        e_sram = mem[0]
        mem = mem[1:] or mem[:1]
    nets = [lv if isinstance(lv, dict) else {} for lv in d.get("network") or []]
    net = [level_energy("network", i, lv, DEFAULT_J_PER_BYTE_NET[min(i, 1)]) for i, lv in enumerate(nets)]
    net = (net + net[-1:] * MAX_NET_LEVELS)[:MAX_NET_LEVELS] if net else [0.0] * MAX_NET_LEVELS
    tdp = number(src, "tdp_w", d.get("tdp_w"))
    static = number(src, "energy.static_w", en.get("static_w", DEFAULT_STATIC_FRACTION * tdp), allow_zero=True)
    if static >= tdp:
        raise SpecError(f"{src}: energy.static_w ({static:g} W) must be below tdp_w ({tdp:g} W)")
    return dict(energy_flop=np.array(flop), energy_sram=e_sram,
                energy_mem=np.array((mem + [0.0] * MAX_MEM_LEVELS)[:MAX_MEM_LEVELS]),
                energy_net=np.array(net), static_power=static)


def mem_kind(name: str) -> str:
    """Memory kind of a level name ('sram', 'hbm', else 'dram') for defaults."""
    name = name.lower()
    if "sram" in name:
        return "sram"
    if "hbm" in name:
        return "hbm"
    return "dram"


def tco_fields(d: dict | None, src="hardware") -> dict:
    """Hardware fields lifetime (s), energy_price (USD/J), pue from a `tco:` block."""
    d = d or {}
    if not isinstance(d, dict):
        raise SpecError(f"{src}: tco must be a mapping with keys lifetime_years, usd_per_kwh, pue")
    check_keys(src, "tco.", d, ("lifetime_years", "usd_per_kwh", "pue"))
    pue = number(src, "tco.pue", d.get("pue", DEFAULT_PUE))
    if pue < 1.0:
        raise SpecError(f"{src}: tco.pue is facility / IT energy, at least 1, got {pue}")
    return dict(lifetime=number(src, "tco.lifetime_years", d.get("lifetime_years", DEFAULT_LIFETIME_YEARS))
                * SECONDS_PER_YEAR,
                energy_price=number(src, "tco.usd_per_kwh", d.get("usd_per_kwh", DEFAULT_USD_PER_KWH),
                                     allow_zero=True) / J_PER_KWH,
                pue=pue)



# energy, tco, pj_per_bit: jaxplat.energy / jaxplat.cost (defaults there)
_HW_KEYS = ("name", "description", "flops", "memory", "network", "efficiency", "software", "compute", "tdp_w",
            "price_usd", "energy", "tco", "host_cpu", "execution")
_MEM_KEYS = ("name", "size", "bandwidth", "pj_per_bit")
_HOST_KEYS = ("name", "clock_hz")
_NET_KEYS = ("name", "domain", "bandwidth", "latency", "topology", "switch_reduction", "pj_per_bit")


# FP32 FLOPs per exponential where a spec gives no exp_rate: an NVIDIA SM from
# Volta to Blackwell issues 16 special-function results a clock beside 128 FP32
# FMAs (256 FLOPs; CUDA C++ Programming Guide, "Arithmetic Instructions" throughput
# table), so an H100 SXM's 67 TFLOP/s FP32 is 132 SMs x 16 x 1.98 GHz = 4.2e12/s.
FP32_FLOPS_PER_EXP = 16.0


def hardware_from_dict(d: dict, src="hardware", calibration: Calibration | None = None,
                       defaults: Calibration | None = None, software: Software | None = None) -> Hardware:
    """Validate a hardware spec dict (either layout: jaxplat.model.hardware_layout;
    schema in docs/reference/specs.md) and build `Hardware`.

    Efficiency parameters the spec leaves out are neutral, or `defaults`'
    (`load_hardware` passes the shipped calibration); `calibration`
    overrides the spec's own (efficiency_spec, "precedence"). The software
    stack's fixed costs and kernel counts come from `software`, else from the
    stack a `calibration` names, else from the chip's execution
    (`software_spec.default_software`) when a calibration or defaults are
    given; a bare `Hardware` (GenZ's profile, tests) keeps neutral ones.
    """
    if not is_flat(d, src):  # the grouped layout (hardware_layout): its sections' keys in the errors
        try:
            return hardware_from_dict(flat_layout(d, src), src, calibration, defaults, software)
        except SpecError as e:
            raise SpecError(grouped_message(str(e), src)) from None
    # tdp_w is required: static power defaults to a share of it, and the
    # chip is held to it (cost.energy.clock_share).
    check_keys(src, "", d, _HW_KEYS, required=("memory", "network"))
    if "tdp_w" not in d:
        raise SpecError(f"{src}: missing key 'tdp_w' (board power in W: static power is a share of it "
                        "and the chip is held to it)")
    compute = compute_fields(d.get("compute"), src)
    array_flops = compute.pop("array_flops", None)
    if "flops" not in d and array_flops is None:
        raise SpecError(f"{src}: missing key 'flops' (or a compute.array that gives the peak)")
    # An array's peak, one multiply-add per PE per cycle, in every dtype (no
    # dtype-dependent rate is modelled for arrays; SCALE-Sim has none either).
    flops = d.get("flops", {dt: array_flops for dt in DTYPES})
    if not isinstance(flops, dict) or not flops:
        raise SpecError(f"{src}: flops must map dtypes to FLOP/s, e.g. {{bf16: 989e12}}")
    listed = {dtype_name(src, "flops", k): number(src, f"flops.{k}", v) for k, v in flops.items()}
    peak, runs_in = fill_peaks(listed, src)
    if "exp_rate" not in compute and "flops" in d and "fp32" in listed:  # a listed FP32 peak, not an array's
        compute["exp_rate"] = listed["fp32"] / FP32_FLOPS_PER_EXP

    levels = d["memory"]
    if not isinstance(levels, list) or not levels:
        raise SpecError(f"{src}: memory must be a non-empty list of levels, fastest first")
    if len(levels) > MAX_MEM_LEVELS:
        raise SpecError(f"{src}: at most {MAX_MEM_LEVELS} memory levels, got {len(levels)}")
    mem = []
    for i, lv in enumerate(levels):
        if not isinstance(lv, dict):
            raise SpecError(f"{src}: memory[{i}] must be a mapping with keys {', '.join(_MEM_KEYS)}")
        check_keys(src, f"memory[{i}].", lv, _MEM_KEYS, required=_MEM_KEYS[:3])
        mem.append((str(lv["name"]), number(src, f"memory[{i}].size", lv["size"]),
                    number(src, f"memory[{i}].bandwidth", lv["bandwidth"])))
    sram_size = sram_bw = 0.0
    if mem[0][0] == "sram":
        _, sram_size, sram_bw = mem[0]
        mem = mem[1:]
        if not mem:  # SRAM-only chip (Groq, Cerebras): SRAM is also main memory
            mem = [("sram", sram_size, sram_bw)]
            sram_size = 0.0
    mem_size = [m[1] for m in mem] + [0.0] * (MAX_MEM_LEVELS - len(mem))
    mem_bw = [m[2] for m in mem] + [1.0] * (MAX_MEM_LEVELS - len(mem))

    nets = d["network"]
    if not isinstance(nets, list) or not nets or len(nets) > MAX_NET_LEVELS:
        raise SpecError(f"{src}: network must be a list of 1 to {MAX_NET_LEVELS} levels, innermost first")
    dom, bw, lat, topo, red = [], [], [], [], []
    for i, lv in enumerate(nets):
        if not isinstance(lv, dict):
            raise SpecError(f"{src}: network[{i}] must be a mapping with keys {', '.join(_NET_KEYS)}")
        check_keys(src, f"network[{i}].", lv, _NET_KEYS, required=("domain", "bandwidth", "latency"))
        dom.append(number(src, f"network[{i}].domain", lv["domain"]))
        bw.append(number(src, f"network[{i}].bandwidth", lv["bandwidth"]))
        lat.append(number(src, f"network[{i}].latency", lv["latency"], allow_zero=True))
        t = choice(f"{src}: network[{i}].topology", lv.get("topology", "switch"), TOPOLOGIES)
        if t == "fully_connected" and i:  # its links are between chips: the level that joins chips first
            raise SpecError(f"{src}: network[{i}].topology fully_connected is for the innermost level only "
                            "(network[0]: each chip linked to each of the domain's others)")
        topo.append(float(TOPOLOGIES.index(t)))
        red.append(switch_reduction(src, i, lv, t))
        if i and dom[i] <= dom[i - 1]:
            raise SpecError(f"{src}: network[{i}].domain must exceed the level inside it ({dom[i - 1]:g})")
    while len(dom) < MAX_NET_LEVELS:  # padding: an unbounded copy of the outermost level
        dom.append(max(1e9, dom[-1] * 2))
        bw.append(bw[-1])
        lat.append(lat[-1])
        topo.append(topo[-1])
        red.append(red[-1])

    return hardware_from_fields(
        flops=np.array([peak[dt] for dt in DTYPES]), sram_size=sram_size, sram_bw=sram_bw,
        gemm_dtype=np.array([DTYPES.index(runs_in[dt]) for dt in DTYPES], np.float64),
        mem_size=np.array(mem_size), mem_bw=np.array(mem_bw), net_domain=np.array(dom),
        net_bw=np.array(bw), net_latency=np.array(lat), net_topology=np.array(topo),
        net_switch_reduce=np.array(red),
        **efficiency_fields(d, src, defaults, calibration, run_software(d, src, software, calibration, defaults)),
        tdp=number(src, "tdp_w", d["tdp_w"]),
        price=number(src, "price_usd", d.get("price_usd", 0.0), allow_zero=True),
        **hardware_energy_fields(d, src), **tco_fields(d.get("tco"), src), **compute,
        host_clock_hz=host_clock(d.get("host_cpu"), src), **execution_fields(d, src))


def run_software(d: dict, src, software: Software | None, calibration: Calibration | None,
                 defaults: Calibration | None) -> dict | None:
    """{Hardware field: value} of the software stack this chip runs (None
    for a bare `Hardware`: no stack, calibration or defaults asked for)."""
    if software is None and calibration is not None and calibration.software:
        software = load_software(calibration.software)
    if software is None and (calibration is not None or defaults is not None):
        software = default_software(d, src)
    return None if software is None else software.fields()


def switch_reduction(src, i, level: dict, topology: str) -> float:
    """1.0 if network level i says `switch_reduction: true` (its switches
    reduce in the network: NVLink SHARP on NVSwitch 3 and later), else 0.0.
    Only a switch can: on a ring, torus or mesh the key is an error."""
    on = level.get("switch_reduction", False)
    if not isinstance(on, bool):
        raise SpecError(f"{src}: network[{i}].switch_reduction must be true or false, got {on!r}")
    if on and topology != "switch":
        raise SpecError(f"{src}: network[{i}].switch_reduction needs topology switch, not {topology}")
    return float(on)


def host_clock(host, src="hardware") -> float:
    """The `host_cpu: {name, clock_hz}` block's maximum clock in Hz (0 when
    absent: the reference host's, efficiency.REFERENCE_HOST_CLOCK_HZ)."""
    if host is None:
        return 0.0
    if not isinstance(host, dict):
        raise SpecError(f"{src}: host_cpu must be a mapping with keys {', '.join(_HOST_KEYS)}")
    check_keys(src, "host_cpu.", host, _HOST_KEYS, required=("clock_hz",))
    return number(src, "host_cpu.clock_hz", host["clock_hz"])


@functools.lru_cache(maxsize=256)  # a fit asks for every row's chip in each leave-one-out refit
def chip_software(name_or_path) -> str:
    """A hardware spec's `software` (the engine part its chip always runs, e.g. rocm), or ""."""
    return str(read_yaml(resolve("hardware", name_or_path)).get("software") or "")


def fill_peaks(listed: dict, src="hardware") -> tuple[dict, dict]:
    """({dtype: FLOP/s}, {dtype: dtype its GEMMs compute in}) for every dtype
    in units.DTYPES from the ones a spec lists.

    A dtype the chip does not list runs on the first unit of
    units.DTYPE_FALLBACK it lists (a narrower dtype on a wider unit, at that
    unit's rate); FP32 and TF32 with no such unit run as 16-bit passes
    (units.EMULATION_PASSES). So no dtype is given a faster rate than the
    units its values need. A spec that lists no 16- or 32-bit rate is refused.
    """
    if not any(d in listed for d in ("fp32", "bf16", "fp16")):
        raise SpecError(f"{src}: flops lists no 16- or 32-bit peak (bf16, fp16 or fp32), only "
                        f"{', '.join(sorted(listed))}: wider dtypes need one to run on")
    peak, runs_in = dict(listed), {dt: dt for dt in DTYPES}
    for dt in DTYPES:
        if dt in peak:
            continue
        unit = next((u for u in DTYPE_FALLBACK[dt] if u in listed), None)
        if unit is not None:
            peak[dt], runs_in[dt] = listed[unit], unit
        else:  # fp32 / tf32 wider than every unit listed: 16-bit passes
            peak[dt] = listed["bf16" if "bf16" in listed else "fp16"] / EMULATION_PASSES[dt]
    return peak, runs_in


def network_level_names(name_or_path) -> list[str]:
    """Names of a hardware spec's network levels, innermost first (for reports)."""
    nets = read_yaml(resolve("hardware", name_or_path)).get("network") or []
    return [str(lv.get("name", f"level {i}")) for i, lv in enumerate(nets)]


def load_hardware(name_or_path, calibration: Calibration | None = None, software: Software | None = None,
                  defaults: Calibration | None = None) -> Hardware:
    """Load a built-in chip by name (e.g. 'h100-sxm') or a YAML/JSON file.

    Efficiency parameters the spec leaves out come from `defaults` (default:
    the shipped calibration, specs/calibration/default.yaml), beneath the
    software stack's; `calibration` (a file from `jaxplat calibrate`)
    overrides them all. The fixed costs of the software
    stack come from `software` (specs/software), else the one `calibration`
    was fitted with, else the chip's default (`graph-captured`, or
    `dataflow` for a chip whose spec says `execution: dataflow`).
    """
    path = resolve("hardware", name_or_path)
    d = read_yaml(path)
    d.setdefault("name", path.stem)
    if isinstance(d, dict) and any(k in d for k in ("flops", "compute", "tdp_w")) and is_flat(d, str(path)):
        note_flat(path)
    return hardware_from_dict(d, src=str(path), calibration=calibration,
                              defaults=default_calibration() if defaults is None else defaults, software=software)


def chip_software_stack(name_or_path, software: Software | None = None,
                        calibration: Calibration | None = None) -> str:
    """Name of the software stack `load_hardware` gives this chip (for reports)."""
    if software is not None:
        return software.name
    if calibration is not None and calibration.software:
        return calibration.software
    path = resolve("hardware", name_or_path)
    return default_software(flat_layout(read_yaml(path), str(path))).name


