"""Sensitivities: elasticities d log metric / d log hardware number of one
deployment, by autodiff and by finite differences (what-if analysis).

Whole-number structure (`STAIRCASES`: SM count, a GEMM tile's sides) enters
the exact cost through ceilings (tile and wave quantization), a staircase
whose autodiff derivative (straight-through or zero) says nothing about
what one more SM does. Those numbers are reported by a central finite
difference over one whole step (n - 1 to n + 1) in both columns, and
`elasticity_methods` says so (DISCRETE_METHOD)."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.cost import evaluate
from jaxplat.cost.dtypes import computed_workload
from jaxplat.cost.efficiency import row_dtypes
from jaxplat.cost.operators import build_table
from jaxplat.model import Hardware, Model, Options, Parallel, Workload, replace
from jaxplat.model.hardware import hardware_paths
from jaxplat.model.pytree import get
from jaxplat.specs.units import DTYPES

ELASTIC_METRICS = ("ttft", "tpot", "throughput", "energy_per_token_j", "cost_per_mtok_usd")
# network.topology is an index and network.switch_reduction a flag, not quantities; array rows, cols and
# cores are whole numbers whose exact-mode effect is a staircase (fold and wave counts)
# with no derivative: their gradients are co-design's, in smooth mode.
_SKIP_FIELDS = ("network.topology", "network.switch_reduction", "chip.array_rows", "chip.array_cols", "chip.cores",
                "chip.gemm_dtype")
# Compute-block numbers that only mean something on a chip with systolic
# arrays (Hardware.chip.dataflow) or an offload target (Hardware.host.offload).
_ARRAY_FIELDS = ("chip.clock_hz",)
_HOST_FIELDS = ("host.flops", "host.bandwidth", "host.latency")
# Whole-number structure of a tensor-core chip (SMs, a GEMM tile's sides): the
# exact cost is a staircase in them (tile and wave quantization,
# cost.efficiency), so a finite difference straddles its steps and is no check
# of the autodiff elasticity there.
STAIRCASES = ("chip.units", "chip.tile_m", "chip.tile_n", "chip.tile_k")
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
    for path in hardware_paths(hw):
        if path in _SKIP_FIELDS or ((path in _ARRAY_FIELDS and not hw.chip.dataflow)
                                    or (path in _HOST_FIELDS and not hw.host.offload)
                                    or (path in ("chip.vector_flops", "chip.exp_rate") and not float(get(hw, path)))):
            continue
        v = np.asarray(get(hw, path))
        if v.ndim == 0:
            out.append((path, path, None))
            continue
        for i in range(v.shape[0]):
            if path in ("chip.flops", "power.energy_flop"):
                if i in dtypes:
                    out.append((f"{path}[{DTYPES[i]}]", path, i))
            elif path.startswith("memory.") or path == "power.energy_mem":
                if float(hw.memory.size[i]) > 0:
                    out.append((f"{path}[{i}]", path, i))
            elif path.startswith("network.") or path == "power.energy_net":
                if float(hw.network.domain[i]) < 1e9:
                    out.append((f"{path}[{i}]", path, i))
    return out


def _scaled(hw: Hardware, numbers, logscale):
    """hw with number j multiplied by exp(logscale[j])."""
    changes = {}
    for j, (_, field, i) in enumerate(numbers):
        v = changes.get(field, get(hw, field))
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
        v = float(np.asarray(get(hw, field)) if i is None else np.asarray(get(hw, field))[i])
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
