"""Sensitivities: elasticities d log metric / d log hardware number of one
deployment, by autodiff and by finite differences (what-if analysis).

Whole-number structure (`STAIRCASES`: SM count, a GEMM tile's sides) enters
the exact cost through ceilings (tile and wave quantization), a staircase
whose autodiff derivative (straight-through or zero) says nothing about
what one more SM does. Those numbers are reported by a central finite
difference over one whole step (n - 1 to n + 1) in both columns, and
`elasticity_methods` says so (DISCRETE_METHOD)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.cost import evaluate
from jaxplat.cost.dtypes import computed_workload
from jaxplat.cost.efficiency import row_dtypes
from jaxplat.cost.operators import build_table
from jaxplat.model import Hardware, Model, Options, Parallel, Workload, replace
from jaxplat.specs.units import DTYPES

ELASTIC_METRICS = ("ttft", "tpot", "throughput", "energy_per_token_j", "cost_per_mtok_usd")
# net_topology is an index and net_switch_reduce a flag, not quantities; array rows, cols and cores are
# whole numbers whose exact-mode effect is a staircase (fold and wave counts)
# with no derivative: their gradients are co-design's, in smooth mode.
_SKIP_FIELDS = ("net_topology", "net_switch_reduce", "array_rows", "array_cols", "cores", "gemm_dtype")
# Compute-block numbers that only mean something on a chip with systolic
# arrays (Hardware.dataflow) or an offload target (Hardware.offload).
_ARRAY_FIELDS = ("clock_hz",)
_HOST_FIELDS = ("host_flops", "host_bw", "host_latency")
# Whole-number structure of a tensor-core chip (SMs, a GEMM tile's sides): the
# exact cost is a staircase in them (tile and wave quantization,
# cost.efficiency), so a finite difference straddles its steps and is no check
# of the autodiff elasticity there.
STAIRCASES = ("units", "tile_m", "tile_n", "tile_k")
AUTODIFF_METHOD = "autodiff"
DISCRETE_METHOD = "finite difference over n-1..n+1 (whole number)"


def elasticity_methods(labels) -> list[str]:
    """How `elasticities` computes the row of each label: AUTODIFF_METHOD, or
    DISCRETE_METHOD for whole-number structure (STAIRCASES)."""
    return [DISCRETE_METHOD if lab in STAIRCASES else AUTODIFF_METHOD for lab in labels]


def gemm_dtypes(model: Model, par: Parallel, wl: Workload, opts: Options = Options()) -> set:
    """Indices into units.DTYPES of the dtypes a deployment's kernels compute
    in: `efficiency.row_dtypes` over the rows with FLOPs of its prefill and
    decode tables (the activations' dtype; under the default profile also
    bf16 for the 16-bit LM head and router, the KV cache's for attention when
    wider)."""
    out = set()
    for phase in ("prefill", "decode"):
        table = build_table(model, par, wl, phase, opts)
        dtype, _ = row_dtypes(table, wl, opts)
        busy = np.asarray(table.f0 + table.f1) * np.asarray(table.count) > 0
        out |= {int(d) for d in np.asarray(dtype)[busy]}
    return out


def hardware_numbers(model: Model, hw: Hardware, par: Parallel, wl: Workload, opts: Options = Options()):
    """[(label, field, index)] of the hardware numbers worth a sensitivity:
    the peaks (and J/FLOP) of the dtypes the kernels run in (`gemm_dtypes`),
    real memory and network levels, and the rest."""
    out = []
    dtypes = gemm_dtypes(model, par, computed_workload(hw, wl, opts), opts)
    for f in dataclasses.fields(Hardware):
        if f.name in _SKIP_FIELDS or f.metadata.get("static"):
            continue
        if ((f.name in _ARRAY_FIELDS and not hw.dataflow) or (f.name in _HOST_FIELDS and not hw.offload)
                or (f.name == "vector_flops" and not float(hw.vector_flops))):
            continue
        v = np.asarray(getattr(hw, f.name))
        if v.ndim == 0:
            out.append((f.name, f.name, None))
            continue
        for i in range(v.shape[0]):
            if f.name in ("flops", "energy_flop"):
                if i in dtypes:
                    out.append((f"{f.name}[{DTYPES[i]}]", f.name, i))
            elif f.name.startswith("mem_") or f.name == "energy_mem":
                if float(hw.mem_size[i]) > 0:
                    out.append((f"{f.name}[{i}]", f.name, i))
            elif f.name.startswith("net_") or f.name == "energy_net":
                if float(hw.net_domain[i]) < 1e9:
                    out.append((f"{f.name}[{i}]", f.name, i))
    return out


def _scaled(hw: Hardware, numbers, logscale):
    """hw with number j multiplied by exp(logscale[j])."""
    changes = {}
    for j, (_, field, i) in enumerate(numbers):
        v = changes.get(field, getattr(hw, field))
        factor = jnp.exp(logscale[j])
        changes[field] = v * factor if i is None else v.at[i].multiply(factor)
    return replace(hw, **changes)


def elasticities(model: Model, hw: Hardware, par: Parallel, wl: Workload, options: Options = Options(),
                 fd_step=0.01):
    """d log metric / d log number for every hardware number, by autodiff and
    by central finite differences (±fd_step in log space); whole-number
    structure (STAIRCASES) by a central difference over n - 1 .. n + 1 in
    both (module docstring; `elasticity_methods` names the method per row).

    Returns:
      (labels [H], metric names [M], grad [H, M], fd [H, M]) numpy arrays.
    """
    numbers = hardware_numbers(model, hw, par, wl, options)
    # Log-space steps of each number: ±fd_step, or to the whole numbers either side.
    up, down = np.full(len(numbers), fd_step, np.float32), np.full(len(numbers), -fd_step, np.float32)
    for j, (label, field, i) in enumerate(numbers):
        v = float(np.asarray(getattr(hw, field)) if i is None else np.asarray(getattr(hw, field))[i])
        if label in STAIRCASES and v >= 2.0:
            up[j], down[j] = np.log((v + 1.0) / v), np.log((v - 1.0) / v)

    def logm(s):
        m = evaluate(model, _scaled(hw, numbers, s), par, wl, options)
        return jnp.log(jnp.stack([jnp.maximum(getattr(m, k), 1e-30) for k in ELASTIC_METRICS]))

    def per_number(e, hi, lo):  # forward-mode derivative along e, and the two finite-difference points
        _, tangent = jax.jvp(logm, (jnp.zeros_like(e),), (e,))
        return tangent, logm(hi * e), logm(lo * e)

    eye = jnp.eye(len(numbers), dtype=jnp.float32)
    grad, m_up, m_down = jax.jit(jax.vmap(per_number))(eye, up, down)  # one compiled program for all three
    fd = np.asarray((m_up - m_down) / (up - down)[:, None])
    labels = [n[0] for n in numbers]
    discrete = np.array([m == DISCRETE_METHOD for m in elasticity_methods(labels)])
    grad = np.where(discrete[:, None], fd, np.asarray(grad))
    return labels, list(ELASTIC_METRICS), grad, fd


__all__ = ["AUTODIFF_METHOD", "DISCRETE_METHOD", "ELASTIC_METRICS", "STAIRCASES", "elasticities",
           "elasticity_methods", "gemm_dtypes", "hardware_numbers"]
