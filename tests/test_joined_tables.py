"""`evaluate` prices the prefill and decode tables' rows in one pass
(optable.joined_tables): one traced copy of the per-row model, a smaller
program to compile. That is exact only if no row's cost reads another row
of its table. Each joined computation must give, on each table's rows, what
the same computation gives on that table alone: the row components
(inference.row_components), the byte prices (memory.joined_byte_prices:
each table placed over the levels by its own footprint) and the dynamic
energy of each phase (energy.phase_energy against dynamic_energy per
table). Models of three kinds (dense GQA under pipeline parallelism, MLA
MoE under expert parallelism, a Mamba/attention MoE hybrid), with and without the memory hierarchy, on a GPU
and on a wafer-scale chip whose SRAM holds the weights (placement matters).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxplat as jp
from jaxplat.cost import energy, memory
from jaxplat.cost.inference import operator_tables, row_components, tables_comm_times
from jaxplat.cost.optable import joined_tables

CASES = [("llama-3.1-8b", jp.Parallel(tp=2, pp=2)), ("deepseek-v3", jp.Parallel(tp=4, ep=2)),
         ("jamba-1.5-mini", jp.Parallel(tp=2))]


def _both_ways(model, hw, par, wl, opts):
    """(joined, per table) of row components, byte prices and phase energy, as arrays."""
    pre, dec = operator_tables(model, hw, par, wl, opts)
    comm = tables_comm_times((pre, dec), hw, opts)
    prices = memory.joined_byte_prices((pre, dec), hw, wl, wl.output, opts.hierarchy)
    joined = row_components(joined_tables((pre, dec)), hw, wl, opts, None, jnp.concatenate(comm), prices)
    alone = [row_components(t, hw, wl, opts, None, c) for t, c in zip((pre, dec), comm)]
    apart = [memory.byte_prices(t, hw, wl, wl.output, opts.hierarchy) for t in (pre, dec)]
    steps, steps_sum = wl.output - 1.0, (wl.output - 1.0) * wl.output / 2.0
    e_joined = energy.phase_energy(pre, dec, hw, wl, opts, steps, steps_sum, 3.0, prices)
    e_alone = (3.0 * energy.dynamic_energy(pre, hw, wl, opts, 1.0, 0.0, apart[0]),
               3.0 * energy.dynamic_energy(dec, hw, wl, opts, steps, steps_sum, apart[1]))
    as_rows = lambda parts: [jnp.concatenate([jnp.broadcast_to(x, t.f0.shape) for x, t in zip(xs, (pre, dec))])  # noqa: E731
                             for xs in zip(*parts)]
    return ((list(joined[:4]), jax.tree.leaves(prices), list(e_joined)),
            (as_rows([a[:4] for a in alone]), as_rows([jax.tree.leaves(p) for p in apart]), list(e_alone)))


@pytest.mark.parametrize("name,par", CASES, ids=[c[0] for c in CASES])
def test_joined_pass_equals_each_table_alone(name, par):
    model, wl = jp.load_model(name), jp.load_workload("chatbot")

    @jax.jit
    def run(gpu, wafer):
        return [_both_ways(model, hw, par, wl, jp.Options(memory_hierarchy=h))
                for hw in (gpu, wafer) for h in (True, False)]

    runs = jax.device_get(run(jp.load_hardware("h100-sxm"), jp.load_hardware("cerebras-wse-3")))
    for joined, alone in runs:
        for got, want in zip(jax.tree.leaves(joined), jax.tree.leaves(alone)):
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)
    # The two chips and the two settings differ somewhere (the check is not of one number four times).
    energies = {round(float(e), 3) for joined, _ in runs for e in joined[2]}
    assert len(energies) > 4
