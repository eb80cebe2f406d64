"""Platform requirements of one model and use case: what a chip must offer.

Two answers side by side (Bambhaniya et al., "Demystifying Platform
Requirements for Diverse LLM Inference Use Cases", arXiv 2406.01698, Sec. 7):

* GenZ's closed forms, read off the operator tables of the one cost model
  (so `Options(profile="genz")` gives GenZ's own accounting):
    mem_bytes              weights + KV cache / recurrent state of the whole
                           request (beams included), per tp·ep shard summed
                           over pipeline stages;
    decode_mem_bw_bytes_s  (weights a decode step uses + KV) / TPOT SLO;
    prefill_flops_s        prefill FLOPs / TTFT SLO.
* The same three found by inverting the full cost model (`*_model` keys):
  the smallest value of that chip number (peak FLOP/s in the compute dtype,
  main-memory bandwidth, main-memory size) at which `evaluate` meets the SLO
  (TTFT, TPOT, fit) on one chip that meets all three: every other number at
  the base chip's value or at its own requirement, whichever is larger (a
  memory-bound prefill needs the bandwidth that decode asks for before more
  FLOP/s can help; two passes settle it). The root is
  bracketed by a vectorized bisection in log space: each round evaluates a
  log-spaced grid (one vmapped `evaluate`) and keeps the cell where the SLO
  starts to hold. Where no value meets it (the other numbers alone exceed
  the SLO), the answer is inf and the reason is named.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.cost import build_table, evaluate, kv_read_mask, peak_flops, state_bytes
from jaxplat.cost.dtypes import computed_workload
from jaxplat.model import Hardware, Model, Options, Parallel, Workload, replace
from jaxplat.specs import UNBOUNDED_SLO

SPAN = 1e4        # the search runs over [base / SPAN, base x SPAN]
GRID = 33         # points per bisection round
ROUNDS = 5        # rounds: relative resolution (SPAN^2)^(1 / (GRID-1)^ROUNDS), ~1e-6


@functools.partial(jax.jit, static_argnames=("options",))
def closed_forms(model: Model, parallel: Parallel, workload: Workload, options: Options = Options()) -> dict:
    """GenZ's closed-form requirements (SI units) from the operator tables.

    Weights: the decode step's resident weights (GenZ: LM head, no embedding
    table; idle experts included). Weights a step uses: those of rows that
    compute, only the experts a step touches (`w0` of the expert rows; GenZ:
    its "Unused Weights" left out). KV: `kv_bytes` of the whole request
    (attention KV plus the Mamba state), per shard over all stages.
    """
    pre = build_table(model, parallel, workload, "prefill", options)
    dec = build_table(model, parallel, workload, "decode", options)
    kv = state_bytes(model, parallel, workload, options)
    weights = jnp.sum(dec.count * dec.stored)
    is_kv = jnp.asarray(kv_read_mask(dec)) > 0
    read = jnp.where(dec.w0 > 0, jnp.minimum(dec.stored, dec.w0), dec.stored)
    used = jnp.sum(dec.count * jnp.where((dec.f0 > 0) & ~is_kv, read, 0.0))
    flops = jnp.sum(pre.count * pre.f0)
    return {"mem_bytes": weights + kv, "decode_mem_bw_bytes_s": (used + kv) / workload.tpot_slo,
            "prefill_flops_s": flops / workload.ttft_slo, "weights_bytes": weights, "used_weights_bytes": used,
            "kv_bytes": kv, "prefill_flops": flops}


def scale_chip(hw: Hardware, k) -> Hardware:
    """The chip `hw` with its numbers scaled by k = [3]: every dtype's peak
    FLOP/s (k[0]), the main memory's bandwidth (k[1]) and size (k[2])."""
    return replace(hw, flops=hw.chip.flops * k[0], mem_bw=hw.memory.bandwidth.at[0].multiply(k[1]),
                   mem_size=hw.memory.size.at[0].multiply(k[2]))


def knob_values(hw: Hardware, wl: Workload, options: Options) -> np.ndarray:
    """[3] the numbers the knobs stand for: peak FLOP/s in the compute dtype
    (before efficiency, as the profile reads it), main-memory bytes/s and bytes."""
    flops = peak_flops(hw, computed_workload(hw, wl, options), options) / hw.efficiency.compute
    return np.array([float(flops), float(hw.memory.bandwidth[0]), float(hw.memory.size[0])])


@functools.partial(jax.jit, static_argnames=("options",))
def _grid(model, hw, par, wl, log_k, options, log_floor):
    """log_k [3, GRID]: row i scales knob i, the others by log_floor [3].
    Returns [3, GRID] whether that knob's SLO holds (TTFT, TPOT, fit) and
    the three metrics."""
    def one(i, lk):
        k = jnp.exp(jnp.where(jnp.arange(3) == i, lk, log_floor))
        m = evaluate(model, scale_chip(hw, k), par, wl, options)
        ok = jnp.stack([m.ttft <= wl.ttft_slo, m.tpot <= wl.tpot_slo, m.fits])[i]
        return ok, jnp.stack([m.ttft, m.tpot, m.memory_bytes, m.throttle])
    rows = jnp.broadcast_to(jnp.arange(3)[:, None], log_k.shape)
    return jax.vmap(jax.vmap(one))(rows, log_k)


def invert(model, hw, par, wl, options: Options = Options(), floor=None):
    """[3] smallest scales k in [1/SPAN, SPAN] of (FLOP/s, memory bandwidth,
    memory size) at which (TTFT, TPOT, fit) hold, each knob with the others
    scaled by `floor` [3] (default 1: the base chip's), by a
    vectorized bisection in log space: each round evaluates GRID log-spaced
    points per knob (one vmapped `evaluate`, one compile) and keeps the cell
    where the SLO starts to hold.

    Returns (k [3], top [3, 4]): k = inf where even SPAN x the base misses,
    top[i] = (ttft, tpot, memory_bytes, power throttle) at SPAN x knob i
    (for the reason).
    """
    lo, hi = np.full(3, -np.log(SPAN)), np.full(3, np.log(SPAN))
    log_floor = jnp.asarray(np.log(np.ones(3) if floor is None else floor), jnp.float32)
    top = None
    for r in range(ROUNDS + 1):
        xs = np.linspace(lo, hi, GRID, axis=1)
        ok, met = jax.device_get(_grid(model, hw, par, wl, jnp.asarray(xs, jnp.float32), options, log_floor))
        if r == 0:
            top = met[:, -1, :]
            never, always = ~ok[:, -1], ok[:, 0]
        i = np.argmax(ok, axis=1)  # the first grid point of each knob that meets its SLO
        lo = np.where(never | always, lo, xs[np.arange(3), np.maximum(i - 1, 0)])
        hi = np.where(never | always, hi, xs[np.arange(3), i])
    k = np.where(never, np.inf, np.where(always, np.exp(-np.log(SPAN)), np.exp(hi)))
    return k, top


def requirements(model: Model, hw: Hardware, par: Parallel, wl: Workload, options: Options = Options()) -> dict:
    """Closed forms and model inversions of one model and use case (SI units).

    Returns a dict: mem_bytes, decode_mem_bw_bytes_s, prefill_flops_s, their
    `*_model` twins, the base chip's numbers (`base_*`), `binding` (the
    chip number that falls furthest short on the base chip: the largest
    required / base ratio) and `reasons` ({key: why it is inf}).
    """
    out = {k: float(v) for k, v in closed_forms(model, par, wl, options).items()}
    keys = ("prefill_flops_s", "decode_mem_bw_bytes_s", "mem_bytes")
    slo = (*(f"{k} <= {v:.4g} s" if v < UNBOUNDED_SLO else f"{k}: no limit"
             for k, v in (("TTFT", float(wl.ttft_slo)), ("TPOT", float(wl.tpot_slo)))),
           "weights, KV and activations fit")
    base = knob_values(hw, wl, options)
    k, top = invert(model, hw, par, wl, options)
    for _ in range(2):  # the others at their own requirement where it is above the base chip's
        floor = np.where(np.isfinite(k), np.maximum(k, 1.0), 1.0)
        if np.all(floor == 1.0):
            break
        k, top = invert(model, hw, par, wl, options, floor)
    reasons = {}
    for i, key in enumerate(keys):
        out[key + "_model"] = float(base[i] * k[i])
        out["base_" + key] = float(base[i])
        if np.isinf(k[i]):
            ttft, tpot, mem, throttle = top[i]
            what = (f"TTFT is still {ttft:.4g} s", f"TPOT is still {tpot:.4g} s", f"{mem:.4g} B still do not fit")[i]
            if i < 2 and throttle > 1.01:  # the energy of the work over the chips' TDP sets the time
                what += (f", held by the chips' power limit (tdp_w {float(hw.power.tdp):g} W: the work's energy at "
                         "this chip's J per FLOP and per byte, even at its lowest voltage (cost.energy.clock_share), "
                         "takes longer than the SLO at that power; a higher tdp_w, less energy per FLOP or byte, or "
                         "more chips would move it)")
            reasons[key + "_model"] = (f"{slo[i]} not met at {SPAN:g} x the base chip's value (the other numbers "
                                       f"at their own requirements): {what}")
    out["binding"] = keys[int(np.argmax(k))]
    out["slo"] = {key + "_model": s for key, s in zip(keys, slo)}
    out["reasons"] = reasons
    return out
