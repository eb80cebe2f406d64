"""Memory of a configuration as a serving engine holds it.

`evaluate` prices one static batch whose prompts are prefilled in one pass,
so its footprint holds the activations of batch x prompt tokens at once. An
engine (TensorRT-LLM, vLLM, SGLang) never does: an iteration holds at most
its token budget (max_num_tokens, or the chunk with chunked prefill), it
reserves the activations of an iteration that large before it sizes its KV
pool, and the KV pool is a fraction of the memory left (`capacity`). Sweeps
and co-design search deployments an engine serves, so they check memory
this way: a batch fits exactly when `estimate --rate 0`'s engine holds it
(batch <= its max_batch).
"""

import dataclasses

import jax
import jax.numpy as jnp

from jaxplat.cost import DEFAULT_SHARPNESS, Metrics, evaluate, safe_div
from jaxplat.model import Hardware, Model, Options, Parallel, Workload, replace
from jaxplat.serving.settings import Serving, serving


def reserve_workload(wl: Workload, budget) -> Workload:
    """The engine's reservation iteration: one prompt of `budget` tokens
    (TensorRT-LLM's max_num_tokens dry run), one output token."""
    return replace(wl, batch=1.0, prompt=budget, output=1.0)


def activation_reserve(model: Model, hw: Hardware, par: Parallel, wl: Workload, budget,
                       opts: Options = Options(), sharpness=DEFAULT_SHARPNESS, tables=None) -> jax.Array:
    """Bytes per chip of the activations of one iteration of `budget` tokens
    (`reserve_workload`: the engine's reservation); `tables`: that
    iteration's `cost.operator_tables` if already built."""
    return evaluate(model, hw, par, reserve_workload(wl, budget), opts, sharpness, tables).activation_bytes


def engine_memory(model: Model, hw: Hardware, par: Parallel, wl: Workload, m: Metrics, opts: Options = Options(),
                  srv: Serving | None = None, sharpness=DEFAULT_SHARPNESS, tables=None):
    """(`m` with activation_bytes, memory_bytes, fits and feasible as an
    engine holds `wl.batch` sequences, fill) (module docstring).

    m: `evaluate`'s metrics of the same configuration. srv: the engine's
    budget and memory fraction (default `serving.serving()`: 8192 tokens,
    0.9; its KV blocks and length spread are not read: whole sequences of
    prompt + output tokens, as `capacity` with fixed lengths and no blocks).
    Activations: `activation_reserve` at srv.budget; the KV pool is
    srv.mem_fraction of the memory left after weights and them, on the
    first memory level when they fit there (as `capacity`); fits: the KV
    cache of the batch is within the pool. fill = (weights + activations +
    KV / mem_fraction) / that memory: fits exactly when fill <= 1 (a smooth
    measure for co-design's penalty). tables: the reservation iteration's
    `cost.operator_tables` (of `reserve_workload(wl, srv.budget)`) if built.
    """
    srv = serving() if srv is None else srv
    act = activation_reserve(model, hw, par, wl, srv.budget, opts, sharpness, tables)
    w, kv = m.weights_bytes, m.kv_bytes
    room = jnp.where(w + act <= hw.memory.size[0], hw.memory.size[0], m.capacity_bytes)
    fits = kv <= srv.mem_fraction * (room - w - act)
    fill = safe_div(w + act + safe_div(kv, srv.mem_fraction), room)
    feasible = m.divisible & m.chips_ok & m.context_ok & fits  # as evaluate's, with this fit
    out = dataclasses.replace(m, activation_bytes=act, memory_bytes=w + kv + act, fits=fits, feasible=feasible)
    return out, fill


__all__ = ["activation_reserve", "engine_memory", "reserve_workload"]
