"""The `efficiency:` and `compute:` blocks of a hardware spec, and
calibration files (written by `jaxplat calibrate`, applied by
`--calibration FILE` and, for every chip, by the shipped defaults).

A chip's efficiency parameters come, in this order (later wins):
  1. neutral values (ideal kernels: fractions 1, latencies 0);
  2. the shipped calibration (`specs/calibration/default.yaml`), its global
     parameters then its entry for the chip, when the spec is loaded by
     `load_hardware` (a built-in name or a file) or from a study;
  3. the spec's own `efficiency:` block;
  4. a calibration file given with `--calibration`, global then per chip.
A calibration may also hold per-engine values (`engines:`, what one serving
engine's kernels reach where it differs from the reference the global values
describe); `Calibration.for_engine(name)` folds one engine's into the global
ones, which `--engine NAME` and measured rows with that `engine` use. A name
may join parts with "+" (`vllm-0.7+rocm`: that release on AMD's ROCm
kernels): each part's values scale the global ones by its own ratio to
them, and the ratios multiply (`engine_parts`). A hardware spec's
`software:` names the part its chip always runs (AMD's `rocm`): every engine
on it, the reference included, gets that part's values too.
The function that turns them into per-operator efficiencies is
`jaxplat.cost.efficiency`; a chip without measurements gets its shape
effects from its own `compute:` block (units, tile: jaxplat.model.compute_spec)
and peaks through that function.
"""

import dataclasses
import functools
from pathlib import Path

from jaxplat.specs import SPEC_ROOT, SpecError, check_keys, number, read_yaml

# YAML name -> (Hardware "group.field" path, neutral value, unit, physical meaning): the fitted
# efficiencies live in Hardware.efficiency, the software stack's costs in Hardware.software, under
# their YAML names.
# Fractions lie in (0, 1]; times are seconds in [0, 1].
PARAMS = {
    "compute": ("efficiency.compute", 1.0, "fraction",
                "share of the dense datasheet peak a large, well-shaped 16-bit GEMM reaches"),
    "memory": ("efficiency.memory", 1.0, "fraction", "share of peak memory bandwidth a long streaming read reaches"),
    "network": ("efficiency.network", 1.0, "fraction", "share of link bandwidth a large collective reaches"),
    "narrow_dtype": ("efficiency.narrow_dtype", 1.0, "fraction",
                     "8-bit and narrower GEMM kernels' share of the 16-bit kernels' achieved fraction "
                     "of their peak"),
    "narrow_fp4": ("efficiency.narrow_fp4", 1.0, "fraction",
                   "FP4 GEMM kernels' share of the FP8 kernels' achieved fraction (block-scale "
                   "dequantization in the mainloop)"),
    "attention": ("efficiency.attention", 1.0, "fraction",
                  "attention kernels' efficiency relative to GEMMs on their memory time (decode's KV-cache reads)"),
    "attention_compute": ("efficiency.attention_compute", 1.0, "ratio",
                          "attention kernels' two matmuls relative to a large GEMM's rate (compute time; their "
                          "softmax's exponentials run at the chip's exp_rate)"),
    "attention_overlap": ("efficiency.attention_overlap", 0.0, "exponent",
                          "p of the p-norm joining a multi-query attention kernel's compute and memory times "
                          "(prefill, training): 0 their max, as the roofline; 2 their Euclidean norm, sqrt(2) x "
                          "the max where they are equal"),
    "moe": ("efficiency.moe", 1.0, "fraction",
            "routed experts' grouped-GEMM kernels' efficiency relative to dense GEMMs over quantized "
            "(8-bit and narrower) experts (compute time); 16-bit experts run like dense GEMMs"),
    "moe_memory": ("efficiency.moe_memory", 1.0, "fraction",
                   "the same on their memory time (streaming the quantized experts' weights)"),
    "moe_fp4": ("efficiency.moe_fp4", 1.0, "fraction",
                "FP4 grouped-GEMM kernels' share of the FP8 ones' efficiency relative to dense GEMMs, on top "
                "of `moe` (compute time; the token copies quantized to FP4 with their block scales per expert)"),
    "scan": ("efficiency.scan", 1.0, "fraction",
             "state-space scan kernels' efficiency relative to GEMMs (compute time; Mamba-2's chunked SSD)"),
    "kernel_latency": ("software.kernel_latency", 0.0, "s",
                       "time each GEMM or attention kernel costs beyond its roofline time"),
    "expert_latency": ("efficiency.expert_latency", 0.0, "s",
                       "time each routed expert's GEMM in a grouped-GEMM kernel costs beyond its roofline time "
                       "(its tiles' pipeline ramp and drain)"),
    "tile_latency": ("efficiency.tile_latency", 0.0, "s",
                     "time each GEMM output tile costs outside its k-loop (filling its operand pipeline, "
                     "about one memory round trip, and storing the tile)"),
    "iteration_overhead": ("software.iteration_overhead", 0.0, "s",
                           "time per engine iteration outside the kernels (scheduling, sampling, launch)"),
    "collective_latency": ("software.collective_latency", 0.0, "s",
                           "time each collective call costs beyond its bandwidth and link-latency time "
                           "(kernel launch, the ranks' barrier)"),
    "sequence_overhead": ("software.sequence_overhead", 0.0, "s",
                          "host CPU time per running sequence per engine iteration on the reference "
                          "3.8 GHz host (scheduler, sampler, response bookkeeping), overlapped with the GPU step"),
}
CALIBRATION_KEYS = ("parameters", "chips", "engines", "fit", "description", "software")


# Largest value of each unit: a fraction of peak, a ratio of one kernel's rate to a GEMM's (a kernel may
# beat the GEMMs' share of the peak, not double it), seconds, a p-norm's exponent (beyond 64 it is the max).
RATIO_MAX = {"fraction": 1.0, "ratio": 2.0, "s": 1.0, "exponent": 64.0}


def check_params(src, where, values: dict) -> dict:
    """Validate a mapping of efficiency parameters; return {name: float}."""
    if not isinstance(values, dict):
        raise SpecError(f"{src}: {where.rstrip('.')} must be a mapping with keys {', '.join(PARAMS)}")
    check_keys(src, where, values, tuple(PARAMS))
    out = {}
    for k, v in values.items():
        unit = PARAMS[k][2]
        x = number(src, f"{where}{k}", v, allow_zero=unit in ("s", "exponent"))
        if x > RATIO_MAX[unit] or (unit == "exponent" and 0.0 < x < 1.0):
            what = {"fraction": "a fraction of peak in (0, 1]", "ratio": f"a ratio to GEMMs' rate in (0, "
                    f"{RATIO_MAX['ratio']:g}]", "s": "seconds in [0, 1]",
                    "exponent": f"0 (the max) or an exponent in [1, {RATIO_MAX['exponent']:g}]"}[unit]
            raise SpecError(f"{src}: {where}{k} is {what}, got {x}")
        out[k] = x
    return out


@dataclasses.dataclass(frozen=True)
class Calibration:
    """Efficiency parameters: global ones, per-chip and per-engine overrides
    (by name)."""

    parameters: dict
    chips: dict = dataclasses.field(default_factory=dict)
    source: str = ""
    engines: dict = dataclasses.field(default_factory=dict)
    applied: tuple = ()  # engine parts already folded into `parameters` (for_engine)
    reference: dict | None = None  # the global parameters before any part was folded in
    # The software stack (specs/software) its fixed costs were fitted with: its
    # own rows, and its engines' values, are predicted with that stack.
    software: str = ""

    def for_chip(self, name: str | None) -> dict:
        """The parameters a chip of this name gets: global, then its own."""
        return {**self.parameters, **self.chips.get(name or "", {})}

    def for_engine(self, name: str | None) -> "Calibration":
        """This calibration as run by engine `name`: its values over the
        global ones (unchanged for None, "" or an engine without values).
        For parts joined by "+", each part's value of a parameter over the
        global one is a factor, and the factors multiply. A part folded in
        before (`applied`: a chip's `software` after a row's "vllm-0.7+rocm")
        is not applied twice."""
        parts = self.applied + tuple(p for p in dict.fromkeys(engine_parts(name)) if p not in self.applied)
        if parts == self.applied:
            return self
        ref = self.reference if self.reference is not None else self.parameters
        params, scaled = dict(ref), set()  # every part folded from the global values, earlier ones again
        for part in parts:
            for k, v in self.engines.get(part, {}).items():
                base = ref.get(k)
                # the first part's value as written (no round trip through a ratio), later ones as factors
                params[k] = params[k] * v / base if k in scaled and base else v
                scaled.add(k)
        return dataclasses.replace(self, parameters=params, applied=parts, reference=ref)


def engine_parts(name: str | None) -> tuple:
    """The parts of an engine name joined by "+" ("vllm-0.7+rocm" -> ("vllm-0.7", "rocm"))."""
    return tuple(p for p in (name or "").split("+") if p)


def calibration_from_dict(d: dict, src="calibration") -> Calibration:
    """A calibration file's mapping (`jaxplat calibrate --out`): fitted
    `parameters` for every chip, optional per-chip and per-engine ones
    (`chips:`, `engines:`) -> `Calibration`; a one-line SpecError naming
    the key otherwise."""
    check_keys(src, "", d, CALIBRATION_KEYS, required=("parameters",))
    chips, engines = d.get("chips") or {}, d.get("engines") or {}
    for key, what in ((chips, "chips"), (engines, "engines")):
        if not isinstance(key, dict):
            raise SpecError(f"{src}: {what} must map {what[:-1]} names to parameter mappings")
    return Calibration(parameters=check_params(src, "parameters.", d["parameters"] or {}),
                       chips={str(c): check_params(src, f"chips.{c}.", v or {}) for c, v in chips.items()},
                       engines={str(e): check_params(src, f"engines.{e}.", v or {}) for e, v in engines.items()},
                       source=str(src), software=str(d.get("software") or ""))


def load_calibration(path) -> Calibration:
    """Read a calibration YAML (as `jaxplat calibrate --out` writes it). Its
    `software:` may name a built-in stack or a YAML file; a relative file
    name is beside the calibration (where `calibrate --out` writes it)."""
    cal = calibration_from_dict(read_yaml(path), src=str(path))
    if cal.software.endswith((".yaml", ".yml")) and not Path(cal.software).is_absolute():
        cal = dataclasses.replace(cal, software=str(Path(path).parent / cal.software))
    return cal


DEFAULT_CALIBRATION = SPEC_ROOT / "calibration" / "default.yaml"


@functools.cache
def default_calibration() -> Calibration | None:
    """The shipped calibration (None when the file is absent)."""
    return load_calibration(DEFAULT_CALIBRATION) if DEFAULT_CALIBRATION.is_file() else None


def select_calibration(path=None, engine=None) -> Calibration | None:
    """The calibration `--calibration PATH --engine ENGINE` ask for: the file
    (default: the shipped one) as run by that engine; None when neither is
    given (the built-in chips then take the shipped defaults)."""
    if not path and not engine:
        return None
    cal = load_calibration(path) if path else default_calibration()
    if engine:
        unknown = [e for e in engine_parts(engine) or (engine,) if cal is None or e not in cal.engines]
        if unknown:
            known = ", ".join(sorted(cal.engines)) if cal is not None and cal.engines else "none"
            from jaxplat.model.software_spec import builtin_names
            stacks = ", ".join(builtin_names("software"))
            raise SpecError(f"--engine {unknown[0]}: not a software stack (specs/software: {stacks}, or a YAML "
                            f"file) and {cal.source if cal else 'no calibration'} has no values for it; "
                            f"engines there: {known} (parts join with +)")
        cal = cal.for_engine(engine)
    return cal


def select_engine(path=None, engine=None):
    """(Calibration or None, Software or None) that `--calibration PATH
    --engine NAME` ask for. An engine that names a software stack
    (specs/software, or a YAML file) selects that stack over the calibration
    (default: the shipped one's efficiencies); any other name is one of the
    calibration's engines (its values, on the stack it was fitted with)."""
    from jaxplat.model.software_spec import is_software, load_software

    if engine and is_software(engine):
        return select_calibration(path, None), load_software(engine)
    return select_calibration(path, engine), None


def sourced_values(src, block):
    """A hardware spec's `efficiency:` block with each value a number or
    `{value: number, source: where it came from}` -> {name: value} (a
    non-mapping block is left to check_params to refuse)."""
    if not isinstance(block, dict):
        return block
    out = {}
    for k, v in block.items():
        if isinstance(v, dict):
            if set(v) != {"value", "source"} or not isinstance(v["source"], str) or not v["source"].strip():
                raise SpecError(f"{src}: efficiency.{k} must be a number or {{value: <number>, source: <where it "
                                "came from: a fit, a microbenchmark>}}")
            v = v["value"]
        out[k] = v
    return out


def efficiency_fields(d: dict, src="hardware", defaults: Calibration | None = None,
                      calibration: Calibration | None = None, stack: dict | None = None) -> dict:
    """{"group.field": value} of the efficiency parameters (precedence in the
    module docstring; `stack`, the run's software stack's {field: value},
    comes after the shipped calibration and before the spec's own block).
    A spec's `software` (the kernel libraries every engine on the chip runs
    on, e.g. rocm) folds that engine part's values into both calibrations,
    once however the engine was named."""
    name = d.get("name")
    software = d.get("software")
    if software is not None:
        if not isinstance(software, str) or not software or "+" in software:
            raise SpecError(f"{src}: software must be one engine part's name (e.g. rocm), got {software!r}")
        defaults = defaults.for_engine(software) if defaults is not None else None
        calibration = calibration.for_engine(software) if calibration is not None else None
    values = {k: p[1] for k, p in PARAMS.items()}
    if defaults is not None:
        values.update(defaults.for_chip(name))
    stack = {path.rpartition(".")[2]: v for path, v in (stack or {}).items()}  # by YAML key
    values.update({k: v for k, v in stack.items() if k in PARAMS})
    values.update(check_params(src, "efficiency.", sourced_values(src, d.get("efficiency", {}) or {})))
    if calibration is not None:
        values.update(calibration.for_chip(name))
    out = {PARAMS[k][0]: v for k, v in values.items()}
    out.update({f"software.{k}": v for k, v in stack.items() if k not in PARAMS})  # kernel counts, host overlap
    return out
