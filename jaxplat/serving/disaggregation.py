"""Disaggregated serving: prefill and decode on separate pools, the KV cache
sent between them.
"""

import jax
import jax.numpy as jnp

from jaxplat.cost import evaluate, safe_div
from jaxplat.model import Hardware, Model, Options, Parallel, Workload, replace
from jaxplat.serving.iteration import decode_time, iteration_time
from jaxplat.serving.queue_model import e2e_quantiles
from jaxplat.serving.settings import SATURATED, Serving, ServingMetrics, lognormal_quantile


def kv_transfer_time(model, hw, par_prefill, wl, opts, level: int = 1):
    """Seconds to send one prompt's KV cache from a prefill chip to the
    decode pool over network level `level` (each prefill chip sends its
    shard in parallel: bytes per chip / derated link bandwidth + latency)."""
    m = evaluate(model, hw, par_prefill, replace(wl, batch=1.0, output=0.0), opts)
    return hw.network.latency[level] + safe_div(m.kv_bytes, hw.network.bandwidth[level] * hw.efficiency.network)


def disaggregated(model: Model, hw: Hardware, par_prefill: Parallel, par_decode: Parallel,
                  wl: Workload, srv: Serving, n_prefill, n_decode, opts: Options = Options(),
                  level: int = 1) -> ServingMetrics:
    """Separate prefill and decode pools (DistServe, Zhong et al. OSDI 2024;
    Splitwise, Patel et al. ISCA 2024): srv.rate requests/s in all.

    Prefill: n_prefill replicas, each an M/D/1 queue of whole-prompt
    iterations (Pollaczek-Khinchine wait rho S / (2 (1 - rho))), then the
    KV transfer over network level `level`. Decode: n_decode replicas
    running decode-only iterations (no prefill interference: Delta = 0).
    """
    z = jnp.zeros((1,), jnp.float32)
    s_pre = iteration_time(model, hw, par_prefill, wl, opts, jnp.float32(0.0), wl.prompt,
                           jnp.reshape(wl.prompt, (1,)), z)
    lam_p = safe_div(srv.rate, n_prefill)
    rho = lam_p * s_pre
    wait = safe_div(rho * s_pre, 2.0 * jnp.maximum(1.0 - rho, 1e-3))
    xfer = kv_transfer_time(model, hw, par_prefill, wl, opts, level)
    dec_srv = replace(srv, rate=safe_div(srv.rate, n_decode), chunk=0.0)
    # decode pool: the queueing model with no prompts to interleave
    ctx = wl.prompt + wl.output * (1.0 + srv.output_cv ** 2) / 2.0
    lam_d = dec_srv.rate

    def step(_, tpot):
        return decode_time(model, hw, par_decode, wl, opts, 1.0 + lam_d * jnp.maximum(wl.output - 1.0, 0.0) * tpot, ctx)
    tpot = jax.lax.fori_loop(0, 40, step, decode_time(model, hw, par_decode, wl, opts, jnp.float32(1.0), ctx))
    zs = jnp.array([0.0, 1.2815516, 2.3263479])
    # Prefill waits of M/D/1 are near-exponential in their tail.
    tail = 1.0 - jnp.array([0.5, 0.9, 0.99])  # P(wait > w_q) at the 50th, 90th and 99th percentiles
    wait_q = safe_div(wait, jnp.maximum(rho, 1e-6)) * jnp.log(jnp.maximum(rho / tail, 1.0))
    pq = lognormal_quantile(wl.prompt, srv.prompt_cv, zs)
    ttft_q = wait_q + s_pre * safe_div(pq, wl.prompt) + xfer
    ttft = wait + s_pre + xfer
    oq = lognormal_quantile(wl.output, srv.output_cv, zs)
    stable = rho < 0.999
    sat = lambda x: jnp.where(stable, x, SATURATED)  # noqa: E731
    steps = jnp.maximum(wl.output - 1.0, 0.0)
    # A request's TPOT is the mean iteration time over its life at the batch
    # it sees: itself and the others, Poisson(b) at any instant (M/G/inf).
    # Averaged over its life D, the others' count has mean b and variance
    # 2 b / 3 (the M/D/inf count's covariance lam (D - tau)+, e.g. Ross,
    # Stochastic Processes sec. 2.3, integrated over [0, D]^2 / D^2);
    # normal approximation.
    b = lam_d * steps * tpot
    n_q = 1.0 + b + zs * jnp.sqrt(2.0 * b / 3.0 + 1e-30)  # + 1e-30: a finite gradient at b = 0
    tpot_q = jax.vmap(lambda n: decode_time(model, hw, par_decode, wl, opts, jnp.maximum(n, 1.0), ctx))(n_q)
    e2e_q = e2e_quantiles(ttft, ttft_q, tpot, tpot_q, oq)
    return ServingMetrics(
        ttft_mean=sat(ttft), ttft_p50=sat(ttft_q[0]), ttft_p90=sat(ttft_q[1]), ttft_p99=sat(ttft_q[2]),
        tpot_mean=sat(tpot), tpot_p50=sat(tpot_q[0]), tpot_p90=sat(tpot_q[1]), tpot_p99=sat(tpot_q[2]),
        e2e_mean=sat(ttft + steps * tpot), e2e_p50=sat(e2e_q[0]), e2e_p90=sat(e2e_q[1]), e2e_p99=sat(e2e_q[2]),
        batch=b, utilization=rho, stable=stable)

