"""Workload spec (YAML) -> `Workload`."""

from jaxplat.model.pytree import as_f32
from jaxplat.model.workload import Workload
from jaxplat.specs import UNBOUNDED_SLO, SpecError, check_keys, dtype_name, number, read_yaml, resolve
from jaxplat.specs.units import BYTES_PER_ELEMENT, DTYPES, WEIGHT_BYTES_PER_ELEMENT

_WL_KEYS = ("name", "description", "batch", "prompt", "output", "beams", "dtype", "slo")
_DTYPE_KEYS = ("weights", "activations", "kv", "experts")
_SLO_KEYS = ("ttft", "tpot")


def workload_from_dict(d: dict, src="workload") -> Workload:
    """Validate a workload spec dict and build `Workload`."""
    check_keys(src, "", d, _WL_KEYS, required=("batch", "prompt", "output"))
    dt = d.get("dtype", "bf16")
    if isinstance(dt, str):
        dt = {k: dt for k in _DTYPE_KEYS[:3]}
    if not isinstance(dt, dict):
        raise SpecError(f"{src}: dtype must be a dtype name or a mapping with keys {', '.join(_DTYPE_KEYS)}")
    check_keys(src, "dtype.", dt, _DTYPE_KEYS)
    dts = {k: dtype_name(src, f"dtype.{k}", dt.get(k, "bf16"), weights=k in ("weights", "experts"))
           for k in _DTYPE_KEYS if k != "experts" or k in dt}
    slo = d.get("slo", {}) or {}
    check_keys(src, "slo.", slo, _SLO_KEYS)
    return as_f32(
        Workload, batch=number(src, "batch", d["batch"]), prompt=number(src, "prompt", d["prompt"]),
        output=number(src, "output", d["output"]), beams=number(src, "beams", d.get("beams", 1)),
        **dtype_fields(dts),
        ttft_slo=number(src, "slo.ttft", slo.get("ttft", UNBOUNDED_SLO)),
        tpot_slo=number(src, "slo.tpot", slo.get("tpot", UNBOUNDED_SLO)))


def dtype_fields(dts: dict) -> dict:
    """{weights, activations, kv[, experts]} dtype names -> the `Workload`
    fields they set: bytes per element of each (a weight's with its block
    scale's share, units.WEIGHT_BYTES_PER_ELEMENT), and the GEMMs' compute
    dtype (the activations', an index into units.DTYPES). Without `experts`
    the routed experts' weights are the others' (bytes_expert_weight 0)."""
    experts = dts.get("experts")
    return dict(bytes_weight=WEIGHT_BYTES_PER_ELEMENT[dts["weights"]], bytes_act=BYTES_PER_ELEMENT[dts["activations"]],
                bytes_kv=BYTES_PER_ELEMENT[dts["kv"]], compute_dtype=float(DTYPES.index(dts["activations"])),
                bytes_expert_weight=WEIGHT_BYTES_PER_ELEMENT[experts] if experts else 0.0)


def load_workload(name_or_path) -> Workload:
    """Load a built-in workload by name (e.g. 'chatbot') or a YAML file."""
    path = resolve("workloads", name_or_path)
    return workload_from_dict(read_yaml(path), src=str(path))
