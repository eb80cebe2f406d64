"""`evaluate`: prefill, decode and memory of one deployment -> `Metrics`.

TTFT is the prefill pass. Decode produces output tokens 2..O; the step that
produces token j + 1 attends over prompt + j tokens. TPOT is the mean step
time, summed exactly in closed form per operator (roofline.sum_over_steps).
The GenZ profile instead reports GenZ's decode latency: one step with the KV
cache at prompt + output tokens (CONVENTIONS.md, "Whole model").
"""

import functools

import jax
import jax.numpy as jnp

from jaxplat import memory
from jaxplat._pytree import pytree_dataclass
from jaxplat.collectives import collective_time, genz_collective_time
from jaxplat.hardware import Hardware
from jaxplat.model import Model
from jaxplat.operators import OpTable, build_table
from jaxplat.options import Options
from jaxplat.parallel import Parallel, chips
from jaxplat.roofline import combine, safe_div, sum_over_steps
from jaxplat.units import DTYPES
from jaxplat.workload import Workload

DEFAULT_SHARPNESS = 20.0  # p of the smooth max: at most 2^(1/20) - 1 = 3.5% above max


@pytree_dataclass
class Metrics:
    """Results of `evaluate`, scalars in SI units.

    ttft, tpot, e2e: seconds (time to first token, mean time per output token,
      end to end for one request). prefill_time, decode_time: seconds of
      the two phases. throughput: output tokens/s of the whole deployment.
    weights_bytes, kv_bytes, activation_bytes, memory_bytes, capacity_bytes:
      per chip. comm_time: seconds spent in collectives over the request.
    chips: chips used. fits, feasible: booleans (feasible = fits and every
      degree divides what it splits).
    """

    ttft: jax.Array
    tpot: jax.Array
    e2e: jax.Array
    throughput: jax.Array
    prefill_time: jax.Array
    decode_time: jax.Array
    comm_time: jax.Array
    weights_bytes: jax.Array
    kv_bytes: jax.Array
    activation_bytes: jax.Array
    memory_bytes: jax.Array
    capacity_bytes: jax.Array
    chips: jax.Array
    fits: jax.Array
    feasible: jax.Array


def peak_flops(hw: Hardware, wl: Workload, opts: Options = Options()) -> jax.Array:
    """Achievable FLOP/s in the workload's compute dtype.

    GenZ has one peak (bf16) and scales it by 2 bytes / bytes per element
    (int8/fp8 run at twice the bf16 rate; CONVENTIONS.md "Units and system").
    """
    if opts.genz:
        return hw.flops[DTYPES.index("bf16")] * 2.0 / wl.bytes_act * hw.eff_compute
    return hw.flops[wl.compute_dtype.astype(jnp.int32)] * hw.eff_compute


def row_components(table: OpTable, hw: Hardware, wl: Workload, opts: Options):
    """Per-row compute and memory time (affine in s) and communication time.

    Memory time charges off-chip bytes at the main memory's bandwidth and
    on-chip bytes at the SRAM bandwidth (free when the chip has none), both
    derated by the memory efficiency (GenZ, CONVENTIONS.md "Per-operator").
    Returns (c0, c1, m0, m1, comm), each [rows] seconds (per token for *1).
    """
    peak = peak_flops(hw, wl, opts)
    main_bw = hw.mem_bw[0] * hw.eff_memory
    sram_bw = hw.sram_bw * hw.eff_memory

    def mem(a, w, o):
        off = (1.0 - table.on_a) * a + (1.0 - table.on_w) * w + (1.0 - table.on_o) * o
        on = table.on_a * a + table.on_w * w + table.on_o * o
        return off / main_bw + safe_div(on, sram_bw)

    comm_fn = genz_collective_time if opts.genz else collective_time
    comm = []
    for i, kind in enumerate(table.comm_kinds):
        comm.append(comm_fn(kind, hw, table.comm_n[i], table.comm_b[i]) if kind else jnp.zeros_like(peak))
    return (table.f0 / peak, table.f1 / peak, mem(table.a0, table.w0, table.o0),
            mem(table.a1, table.w1, table.o1), jnp.stack(comm))


def row_step_times(table, hw, wl, opts, s, p=None):
    """[rows] seconds of each operator at s generated tokens (one pass)."""
    c0, c1, m0, m1, comm = row_components(table, hw, wl, opts)
    return combine(c0 + c1 * s, m0 + m1 * s, comm, p)


def row_decode_sums(table, hw, wl, opts, lo, hi, p=None):
    """[rows] seconds of each operator summed over decode steps s = lo..hi."""
    c0, c1, m0, m1, comm = row_components(table, hw, wl, opts)
    return sum_over_steps(c0, c1, m0, m1, comm, lo, hi, p)


def _feasible(model: Model, par: Parallel) -> jax.Array:
    """Degrees divide what they split (heads, KV heads, experts)."""
    divides = lambda x, d: jnp.mod(x, d) == 0  # noqa: E731
    kv_ok = divides(model.kv_heads, par.tp) | divides(par.tp, model.kv_heads)
    experts_ok = (model.experts == 0) | divides(model.experts, par.ep)
    return divides(model.heads, par.tp) & kv_ok & experts_ok & (par.tp >= 1) & (par.ep >= 1)


@functools.partial(jax.jit, static_argnames=("options",))
def evaluate(model: Model, hardware: Hardware, parallel: Parallel, workload: Workload,
             options: Options = Options(), sharpness=DEFAULT_SHARPNESS) -> Metrics:
    """Cost of serving `workload` with `model` on `hardware` split by `parallel`.

    Pure and jitted; vmap or grad it over any float leaf. `options` is static.
    `sharpness` is the traced p of the smooth max (used when options.smooth).
    """
    if options.genz and model.attention == "mla":
        raise ValueError("the genz profile has no MLA (GenZ does not model it); use profile 'default'")
    p = sharpness if options.smooth else None
    wl = workload
    pre = build_table(model, parallel, wl, "prefill", options)
    dec = build_table(model, parallel, wl, "decode", options)

    ttft = jnp.sum(pre.count * row_step_times(pre, hardware, wl, options, 0.0, p))
    steps = jnp.maximum(wl.output - 1.0, 0.0)
    if options.genz:
        tpot = jnp.sum(dec.count * row_step_times(dec, hardware, wl, options, wl.output, p))
        decode_time = steps * tpot
        throughput = safe_div(wl.batch, tpot)  # GenZ: decode tokens/s, beams not counted
    else:
        decode_time = jnp.sum(dec.count * row_decode_sums(dec, hardware, wl, options, 1.0, steps, p))
        tpot = safe_div(decode_time, steps)
    e2e = ttft + decode_time
    if not options.genz:
        throughput = parallel.dp * safe_div(wl.batch * wl.output, e2e)

    _, _, _, _, comm_pre = row_components(pre, hardware, wl, options)
    _, _, _, _, comm_dec = row_components(dec, hardware, wl, options)
    comm_time = jnp.sum(pre.count * comm_pre) + steps * jnp.sum(dec.count * comm_dec)

    heads_kv = jnp.maximum(jnp.ceil(model.kv_heads / (parallel.tp * (parallel.ep if options.genz else 1.0))), 1.0)
    w = memory.weights_bytes(pre)
    kv = memory.kv_bytes(model, wl, heads_kv)
    act = memory.activation_bytes(pre)
    total = w + kv + act
    cap = memory.capacity_bytes(hardware)
    fits = total <= cap
    return Metrics(ttft=ttft, tpot=tpot, e2e=e2e, throughput=throughput, prefill_time=ttft,
                   decode_time=decode_time, comm_time=comm_time, weights_bytes=w, kv_bytes=kv,
                   activation_bytes=act, memory_bytes=total, capacity_bytes=cap,
                   chips=chips(parallel), fits=fits, feasible=fits & _feasible(model, parallel))
