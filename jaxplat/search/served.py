"""The sweep's per-configuration function of an inference study, in two steps.

Step 1, `served_tables`: the operator tables of a configuration (the
evaluation's and the serving engine's reservation iteration's), which only
the outer axes fix (model, workload, parallel degrees, chip: of the chip
only the dtypes its GEMMs run in, `cost.operator_tables`). Step 2,
`served_point`: the metrics, feasibility and constraint failures, pricing
given tables on the hardware numbers. The sweep engine builds the tables
once per outer point, in a small program of their own, and prices them
over every hardware point of a block (search.Engine.compile); with no
tables given, step 2 builds them itself. Training studies have their own
function (search.train_study.measure), whose tables are built per block.

The two steps replaced a pass that split the jaxpr of the whole function
at its shared inputs (search/staging.py, removed), hoisting all of what the
outer axes fix, not only the tables. On experiments/bench_sweep.py (2
shared CPU cores, jax 0.10.2; runs alternated) the sweep ran at 1.56e7,
1.64e7 and 1.78e7 configurations per CPU-second against 1.24e7, 1.32e7 and
1.26e7 before (9.0e6 against 8.3e6 configs/s of wall time at load 5), and
the engine's compile took 22.2, 22.9 and 18.3 s of CPU against 19.2, 18.7
and 18.9 s (18.2 against 15.4 s of wall time; a step of 421 XLA kernels
against 273).
"""

import jax.numpy as jnp

from jaxplat.cost import Metrics, evaluate, operator_tables
from jaxplat.serving import engine_memory
from jaxplat.serving.footprint import reserve_workload
from jaxplat.serving.settings import serving


def served_tables(model, hw, par, wl, options) -> tuple:
    """Step 1: (the configuration's (prefill, decode) operator tables, the
    reservation iteration's, or () under a profile without a serving model).
    `hw` matters only through its GEMM dtypes (`cost.operator_tables`)."""
    reserve = operator_tables(model, hw, par, reserve_workload(wl, serving().budget), options) \
        if options.profile == "default" else ()
    return operator_tables(model, hw, par, wl, options), reserve


def served_metrics(model, hw, par, wl, options, tables=None) -> Metrics:
    """`evaluate` of one configuration with its memory as a serving engine
    holds it (serving.engine_memory: the activations of one iteration of the
    engine's token budget, not of the whole batch's prompts at once, and the
    KV pool its memory fraction allows), so that a batch fits exactly when
    `jaxplat estimate --rate 0` holds it. The genz profile keeps GenZ's own
    footprint (it has no serving model). `tables`: `served_tables` of the
    same configuration if built (None: built here)."""
    main, reserve = (None, None) if tables is None else tables
    m = evaluate(model, hw, par, wl, options, tables=main)
    if options.profile != "default":
        return m
    return engine_memory(model, hw, par, wl, m, options, tables=reserve)[0]


def served_point(model, hw, par, wl, chips_eq, st, tables=None):
    """Step 2: (Metrics, feasible, named constraint failures) of an inference
    configuration of study `st` (`tables`: as `served_metrics`)."""
    m = served_metrics(model, hw, par, wl, st.options, tables)
    fails = dict(
        over_chips=m.chips > st.max_chips,
        wrong_chips=(m.chips != chips_eq) if chips_eq is not None else jnp.bool_(False),
        over_ttft=m.ttft > _slo_value(st.ttft, wl.ttft_slo),
        over_tpot=m.tpot > _slo_value(st.tpot, wl.tpot_slo),
        over_memory=m.memory_bytes > st.max_memory_fraction * m.capacity_bytes)
    return m, m.feasible, fails


def _slo_value(setting, workload_slo):
    if setting is None:
        return jnp.float32(jnp.inf)
    if setting == "workload":
        return workload_slo
    return jnp.float32(setting)


__all__ = ["served_metrics", "served_point", "served_tables"]
