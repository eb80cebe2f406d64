"""Serving dynamics on top of the one cost model: capacity, continuous
batching with chunked prefill (one engine iteration is one merged operator
table), queueing under Poisson load, goodput, disaggregated pools,
speculative decoding, and a request-level simulator that checks the
queueing approximation. Imports `jaxplat.cost` and below.

Units: SI (seconds, bytes, requests/s, tokens/s).
"""

import jax

from jaxplat.serving.concurrency import ClosedLoop, closed_loop, max_load
from jaxplat.serving.disaggregation import disaggregated, kv_transfer_time
from jaxplat.serving.economics import OperatingPoint, operating_point
from jaxplat.serving.footprint import activation_reserve, engine_memory
from jaxplat.serving.iteration import capacity, decode_time, iteration_table, iteration_time, merge_tables
from jaxplat.serving.queue_model import goodput, queueing, slo_met
from jaxplat.serving.settings import (
                                      DEFAULT_MEM_FRACTION,
                                      DEFAULT_TOKEN_BUDGET,
                                      SATURATED,
                                      Serving,
                                      ServingMetrics,
                                      lognormal_params,
                                      lognormal_quantile,
                                      normal_score,
                                      replica_budget,
                                      serving,
)
from jaxplat.serving.simulator import Requests, sample_requests, simulate, simulate_sampled, summarize
from jaxplat.serving.speculative import expected_tokens, speculative_tpot

# Jitted entry points for callers that run one configuration (the options static).
queueing_jit = jax.jit(queueing, static_argnames=("opts", "fixed_point_steps"))
goodput_jit = jax.jit(goodput, static_argnames=("opts", "steps"))
max_load_jit = jax.jit(max_load, static_argnames=("opts",))
closed_loop_jit = jax.jit(closed_loop, static_argnames=("opts", "steps"))
capacity_jit = jax.jit(capacity, static_argnames=("opts",))
iteration_time_jit = jax.jit(iteration_time, static_argnames=("opts",))
speculative_tpot_jit = jax.jit(speculative_tpot, static_argnames=("opts",))
disaggregated_jit = jax.jit(disaggregated, static_argnames=("opts", "level"))

# The public names (documented, kept stable). The other names imported above serve
# this project's own modules and older scripts; new code imports them from their module.
__all__ = ["ClosedLoop", "OperatingPoint", "Requests", "Serving", "ServingMetrics", "capacity", "closed_loop",
           "disaggregated", "expected_tokens", "goodput", "iteration_time", "max_load", "operating_point", "queueing",
           "sample_requests", "serving", "simulate", "speculative_tpot"]
