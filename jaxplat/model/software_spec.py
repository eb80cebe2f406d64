"""Software stack specs (`specs/software/*.yaml`): how an engine runs a step,
apart from the chip it runs on.

A chip's datasheet says how fast it computes, stores and moves bytes; an
engine decides how many kernels a layer becomes after fusion, what a launch
costs inside or outside a CUDA graph, what a collective costs beyond its
wire time, what the scheduler costs per step and whether the host's work per
sequence hides behind the device. Those numbers belong to the engine: they
are chosen per run (`--engine NAME`), never fitted into a chip.

Each key of a software spec is `{value: number, source: text}`: the number in
SI units inside its physical bound (`SOFTWARE_KEYS`), the source saying where
it comes from (a microbenchmark, a profile, an engine's docs). Every key is
required: a stack is a whole description, not a patch.

Which stack a run uses, in this order:
  1. `--engine NAME` (or a study's `software:`), when it names a software spec;
  2. the stack a calibration was fitted with (`Calibration.software`), for
     its own measured rows and its engines' values (`--engine anl-vllm`);
  3. the chip's default: `dataflow` for a spec that says `execution: dataflow`,
     else `graph-captured`.
"""

import dataclasses
import functools

from jaxplat.specs import SpecError, builtin_names, check_keys, number, read_yaml, resolve

# YAML key -> (Hardware "group.field" path, unit, (lowest, highest) physical bound, meaning). The
# YAML keys are the fields' names in Hardware.software (and the calibration's parameter names).
SOFTWARE_KEYS = {
    "kernel_latency": ("software.kernel_latency", "s", (0.0, 1e-4),
                      "time each kernel costs on the device's critical path beyond its roofline time (launch, "
                      "ramp and drain)"),
    "elementwise_kernels": ("software.elementwise_kernels", "kernels", (0.0, 1.0),
                            "kernels each element-wise operator (norm, RoPE, activation, residual add) runs as: "
                            "0 fused into its neighbours, 1 its own kernel"),
    "attention_kernels": ("software.attention_kernels", "kernels", (1.0, 3.0),
                          "kernels one attention operator runs as: 1 fused (FlashAttention), 2-3 unfused "
                          "(scores, softmax, weighted sum)"),
    "collective_latency": ("software.collective_latency", "s", (0.0, 1e-4),
                          "time each collective call costs beyond its bandwidth and link-latency time (its "
                          "kernel's launch, the ranks' barrier)"),
    "iteration_overhead": ("software.iteration_overhead", "s", (0.0, 0.05),
                  "time per engine step outside the kernels (graph launch, sampling, the token's copy to the host)"),
    "rank_overhead": ("software.rank_overhead", "s", (0.0, 0.01),
                      "time per engine step added by each doubling of the tensor-parallel ranks (the step handed "
                      "to each worker, the ranks' barrier)"),
    "sequence_overhead": ("software.sequence_overhead", "s", (0.0, 2e-4),
                      "host CPU time per running sequence per step on the reference 3.8 GHz host"),
    "host_overlap": ("software.host_overlap", "fraction", (0.0, 1.0),
                     "1 when the host's per-sequence work runs while the device runs the previous step "
                     "(overlap scheduler), 0 when it runs between steps"),
    "moe_speed": ("software.moe_speed", "ratio", (0.05, 1.0),
                  "rate of the engine's MoE layers on their routed experts' compute (8-bit and narrower experts) "
                  "over the reference grouped-GEMM kernel's: 1 that kernel's rate; below it, the engine's own "
                  "grouped GEMMs and the routing, permutes and activation quantization run beside them"),
}
_TOP_KEYS = ("name", "description", *SOFTWARE_KEYS)
DEFAULT_STACK = "graph-captured"
DATAFLOW_STACK = "dataflow"
EXECUTIONS = ("kernels", "dataflow")


@dataclasses.dataclass(frozen=True)
class Software:
    """A software stack: its name, values (SI, keyed as SOFTWARE_KEYS) and
    each value's source."""

    name: str
    values: dict
    sources: dict = dataclasses.field(default_factory=dict)

    def fields(self) -> dict:
        """{Hardware "group.field" path: value} of this stack."""
        return {SOFTWARE_KEYS[k][0]: v for k, v in self.values.items()}


def software_from_dict(d: dict, src="software") -> Software:
    """Validate a software spec dict and build `Software` (one-line errors
    naming the file, the key and the allowed values)."""
    if not isinstance(d, dict):
        raise SpecError(f"{src}: a software spec is a mapping with keys {', '.join(_TOP_KEYS)}")
    check_keys(src, "", d, _TOP_KEYS, required=("name", *SOFTWARE_KEYS))
    values, sources = {}, {}
    for key, (_, unit, (lo, hi), meaning) in SOFTWARE_KEYS.items():
        entry = d[key]
        if not isinstance(entry, dict) or set(entry) != {"value", "source"}:
            raise SpecError(f"{src}: {key} must be {{value: <{unit}>, source: <where it comes from>}} ({meaning})")
        x = number(src, f"{key}.value", entry["value"], allow_zero=True)
        if not lo <= x <= hi:
            raise SpecError(f"{src}: {key}.value must lie in [{lo:g}, {hi:g}] {unit} ({meaning}), got {x:g}")
        if not isinstance(entry["source"], str) or not entry["source"].strip():
            raise SpecError(f"{src}: {key}.source must say where the value comes from (a microbenchmark, a profile, "
                            "an engine's docs)")
        values[key], sources[key] = x, " ".join(entry["source"].split())
    return Software(name=str(d["name"]), values=values, sources=sources)


def is_software(name_or_path) -> bool:
    """Whether `name_or_path` names a built-in software stack or a YAML file."""
    s = str(name_or_path or "")
    return bool(s) and (s.endswith((".yaml", ".yml")) or s in builtin_names("software"))


@functools.lru_cache(maxsize=64)
def load_software(name_or_path) -> Software:
    """A built-in stack by name (`specs/software/NAME.yaml`) or a YAML file."""
    path = resolve("software", name_or_path)
    return software_from_dict(read_yaml(path), src=str(path))


_DATAFLOW_KEYS = ("kind", "fabric_hops", "clock_hz")


def execution_kind(d: dict, src="hardware") -> str:
    """A hardware spec's `execution` kind ("kernels", the default, or
    "dataflow"; `execution_fields` has its numbers).

    A dataflow chip keeps its weights resident in on-chip memory and pipelines
    its layers, so it needs an on-chip memory level (the first level named
    `sram`) and its fabric's numbers: `execution: {kind: dataflow,
    fabric_hops: N, clock_hz: F}`."""
    ex = d.get("execution", "kernels")
    kind = ex.get("kind") if isinstance(ex, dict) else ex
    if kind not in EXECUTIONS:
        raise SpecError(f"{src}: execution must be kernels or {{kind: dataflow, fabric_hops: N, clock_hz: F}}, "
                        f"got {ex!r}")
    if kind == "dataflow":
        if not isinstance(ex, dict):
            raise SpecError(f"{src}: execution: dataflow needs its fabric: {{kind: dataflow, fabric_hops: <hops a "
                            "value crosses from one edge of the chip to the other>, clock_hz: <fabric clock, one hop "
                            "a cycle>}}")
        check_keys(src, "execution.", ex, _DATAFLOW_KEYS, required=_DATAFLOW_KEYS)
        levels = d.get("memory") or []
        first = levels[0] if isinstance(levels, list) and levels and isinstance(levels[0], dict) else {}
        if str(first.get("name", "")) != "sram":
            raise SpecError(f"{src}: execution: dataflow needs an on-chip memory level to keep the weights "
                            "resident (memory[0] named sram)")
    return kind


def execution_fields(d: dict, src="hardware") -> dict:
    """`Hardware` fields of a spec's execution: `fabric_latency`, seconds each
    operator (a GEMM, the attention kernel) of a dataflow chip takes to
    broadcast its input across the chip's fabric and reduce its partial sums
    back, 2 x fabric_hops / clock_hz (one hop a cycle on the 2D core mesh of
    a wafer, Lie, "Cerebras Architecture Deep Dive", Hot Chips 34, 2022; the
    east-west streams of Groq's TSP, Abts et al., ISCA 2022); 0 on a chip
    that runs kernels (its ramp and drain are the software stack's
    kernel_latency)."""
    if execution_kind(d, src) != "dataflow":
        return {"fabric_latency": 0.0}
    ex = d["execution"]
    hops = number(src, "execution.fabric_hops", ex["fabric_hops"])
    return {"fabric_latency": 2.0 * hops / number(src, "execution.clock_hz", ex["clock_hz"])}


def default_software(d: dict, src="hardware") -> Software:
    """The stack a chip runs when no engine is named (by its `execution`)."""
    return load_software(DATAFLOW_STACK if execution_kind(d, src) == "dataflow" else DEFAULT_STACK)


__all__ = ["DATAFLOW_STACK", "DEFAULT_STACK", "EXECUTIONS", "SOFTWARE_KEYS", "Software", "default_software",
           "execution_fields", "execution_kind", "is_software", "load_software", "software_from_dict"]
