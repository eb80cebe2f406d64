"""Request-level simulator of a continuous-batching engine, written in JAX.

One `lax.scan` step is one engine iteration: admit arrived requests into free
slots (FIFO, at most `max_batch` running), give each running decode one
token, share the prefill token budget among prompts in arrival order, cost
the iteration with the cost model (`serving.iteration_time`: the same merged
operator table as the queueing approximation), advance the clock, record
first-token and finish times. All state has fixed shapes (`slots` request
slots, `n_requests` pre-sampled requests), so the whole simulation jits once
and vmaps over thousands of configurations (hardware, rates, budgets...).

It checks `serving.queueing` (tests/test_serving.py) and gives latency
distributions where the approximation's are rough. Units: SI.
"""

import functools

import jax
import jax.numpy as jnp

from jaxplat.model import Hardware, Model, Options, Parallel, Workload, pytree_dataclass
from jaxplat.serving.iteration import iteration_time
from jaxplat.serving.settings import Serving, ServingMetrics, lognormal_params, replica_budget

_BIG = 1e30  # s: "never" (an arrival beyond the horizon, an unfinished request)


@pytree_dataclass
class Requests:
    """[n] arrival times (s), prompt and output lengths (tokens, floats >= 1)."""

    arrival: jax.Array
    prompt: jax.Array
    output: jax.Array


def sample_requests(key, wl: Workload, srv: Serving, n: int, max_len=1e6) -> Requests:
    """Poisson arrivals at srv.rate and log-normal lengths (means wl.prompt and
    wl.output, CVs srv.prompt_cv / output_cv), rounded, clipped to [1, max_len]
    (output >= 2 so every request has a TPOT)."""
    k1, k2, k3 = jax.random.split(key, 3)
    gaps = jax.random.exponential(k1, (n,)) / jnp.maximum(srv.rate, 1e-9)
    arrival = jnp.where(srv.rate > 0, jnp.cumsum(gaps), 0.0)

    def lengths(k, mean, cv, lo):
        mu, sigma = lognormal_params(mean, cv)
        x = jnp.exp(mu + sigma * jax.random.normal(k, (n,)))
        return jnp.clip(jnp.round(x), lo, max_len)
    return Requests(arrival, lengths(k2, wl.prompt, srv.prompt_cv, 1.0), lengths(k3, wl.output, srv.output_cv, 2.0))


def _rank(mask):
    """0-based rank of each True entry among the True entries (slot order)."""
    return jnp.cumsum(mask) - 1


def simulate(model: Model, hw: Hardware, par: Parallel, wl: Workload, srv: Serving, reqs: Requests,
             opts: Options = Options(), warmup=0.2, *, slots: int = 64, iterations: int = 4096,
             closed: bool = False):
    """Run the engine over `reqs` and summarize latencies.

    Args:
      srv: uses max_batch (running sequences, <= slots; 0 = slots), chunk
        (prefill token budget per iteration including decodes; 0 = whole
        prompts, in-flight batching), max_num_tokens (the budget of an
        iteration with whole prompts: prompts that fit join it whole) and
        prefill_first (decodes wait while prompts do).
      reqs: `Requests` sorted by arrival.
      slots, iterations: static sizes (request slots; scan length).
      warmup: fraction of the first requests left out of the statistics
        (traced).
      closed: closed loop (static): srv.max_batch clients, each sending its
        next request when its last ends. Pass requests that have all
        arrived (arrival 0, `sample_requests` at rate 0): a request is
        admitted in the iteration after a slot frees, which is when its
        client sent it, so its latencies count from admission.
    Returns:
      (ServingMetrics over finished requests after the warm-up, dict with
      'finished' fraction, 'first' and 'finish' [n] seconds after each
      request's arrival (1e30 if not reached), 'sim_time').
    """
    n = reqs.arrival.shape[0]
    cap = jnp.where(srv.max_batch > 0, jnp.minimum(srv.max_batch, slots), float(slots))
    budget = replica_budget(srv, par)
    ids = jnp.arange(slots)
    f32 = jnp.float32

    def step(state, _):
        t, nxt, req, left, ctx, gen, age, first, finish = state
        active = req >= 0
        # Idle engine: jump to the next arrival.
        arr_next = jnp.where(nxt < n, reqs.arrival[jnp.minimum(nxt, n - 1)], _BIG)
        t = jnp.where(~jnp.any(active) & (arr_next > t) & (nxt < n), arr_next, t)
        # Admit arrived requests into free slots, FIFO, up to `cap` running.
        arrived = jnp.searchsorted(reqs.arrival, t, side="right")
        room = jnp.maximum(cap - jnp.sum(active), 0.0).astype(jnp.int32)
        k = jnp.minimum(jnp.maximum(arrived - nxt, 0), room)
        free = ~active & (ids < cap)
        r = _rank(free)
        take = free & (r < k)
        rid = jnp.minimum(nxt + r, n - 1)
        req = jnp.where(take, nxt + r, req)
        left = jnp.where(take, reqs.prompt[rid], left)
        ctx = jnp.where(take, 0.0, ctx)
        gen = jnp.where(take, 0.0, gen)
        # Latencies accumulate per slot in small numbers (float32 keeps ~1e-7
        # relative of each; an absolute clock of 1e3 s would lose 6e-5 s).
        age = jnp.where(take, 0.0 if closed else t - reqs.arrival[rid], age)
        nxt = nxt + k
        active = req >= 0
        # Schedule: decodes first (one token each), then prompt chunks in
        # arrival order within the remaining budget (Sarathi-Serve); with
        # srv.prefill_first, an iteration with prompts waiting runs only
        # them and the decodes wait (vLLM V0's default scheduler).
        pre = active & (left > 0)
        hold = (srv.prefill_first > 0) & jnp.any(pre)
        dec = active & (left <= 0) & ~hold
        n_dec = jnp.sum(dec).astype(f32)
        order = jnp.argsort(jnp.where(pre, req, n + ids))
        left_sorted = jnp.where(pre, left, 0.0)[order]
        before = jnp.cumsum(left_sorted) - left_sorted
        avail = jnp.maximum(budget - n_dec, 0.0)
        # Chunked: the budget's tokens go to prompts in order, the last one
        # cut. Whole prompts: those that fit whole, in order (the first one
        # always, or a prompt over the budget would never run).
        chunks = jnp.clip(avail - before, 0.0, left_sorted)
        whole = jnp.where((before + left_sorted <= avail) | (before == 0.0), left_sorted, 0.0)
        alloc_sorted = jnp.where(srv.chunk > 0, chunks, whole)
        alloc = jnp.zeros_like(left).at[order].set(alloc_sorted)
        ctx_dec = jnp.where(n_dec > 0, jnp.sum(jnp.where(dec, ctx + 1.0, 0.0)) / jnp.maximum(n_dec, 1.0), 0.0)
        work = (n_dec > 0) | jnp.any(alloc > 0)
        dt = iteration_time(model, hw, par, wl, opts, n_dec, ctx_dec, alloc, jnp.where(alloc > 0, ctx, 0.0))
        dt = jnp.where(work, dt, 0.0)
        t = t + dt
        age = age + jnp.where(active, dt, 0.0)
        # Update: prompts advance; a finished prompt yields the first token.
        left = left - alloc
        ctx = ctx + alloc + jnp.where(dec, 1.0, 0.0)
        done_pre = pre & (left <= 0) & work
        gen = gen + jnp.where(dec | done_pre, 1.0, 0.0)
        # Empty slots scatter out of bounds (dropped), so writes never collide.
        first = first.at[jnp.where(done_pre, req, n)].set(age, mode="drop")
        out = reqs.output[jnp.maximum(req, 0)]
        done = active & (gen >= out) & work
        finish = finish.at[jnp.where(done, req, n)].set(age, mode="drop")
        req = jnp.where(done, -1, req)
        return (t, nxt, req, left, ctx, gen, age, first, finish), None

    z = jnp.zeros((slots,), f32)
    init = (f32(0.0), jnp.int32(0), jnp.full((slots,), -1, jnp.int32), z, z, z, z,
            jnp.full((n,), _BIG, f32), jnp.full((n,), _BIG, f32))
    (t, _, _, _, _, _, _, first, finish), _ = jax.lax.scan(step, init, None, length=iterations)
    return summarize(reqs, first, finish, warmup), {"finished": jnp.mean(finish < _BIG), "first": first,
                                                    "finish": finish, "sim_time": t}


def _stats(x, valid):
    """(mean, p50, p90, p99) of x over valid entries (nearest-rank), no NaN."""
    cnt = jnp.maximum(jnp.sum(valid), 1)
    mean = jnp.sum(jnp.where(valid, x, 0.0)) / cnt
    xs = jnp.sort(jnp.where(valid, x, _BIG))
    qs = jnp.array([0.5, 0.9, 0.99])
    idx = jnp.clip(jnp.ceil(qs * cnt).astype(jnp.int32) - 1, 0, x.shape[0] - 1)
    return mean, xs[idx]


def summarize(reqs: Requests, first, finish, warmup=0.2) -> ServingMetrics:
    """Latency statistics of the finished requests after the warm-up share;
    `first` and `finish` are [n] seconds after arrival."""
    n = reqs.arrival.shape[0]
    late = jnp.arange(n) >= warmup * n
    valid = late & (finish < _BIG)
    ttft = first
    tpot = (finish - first) / jnp.maximum(reqs.output - 1.0, 1.0)
    e2e = finish
    (tm, tq), (pm, pq), (em, eq) = _stats(ttft, valid), _stats(tpot, valid), _stats(e2e, valid)
    done = jnp.mean(jnp.where(late, finish < _BIG, True))
    return ServingMetrics(ttft_mean=tm, ttft_p50=tq[0], ttft_p90=tq[1], ttft_p99=tq[2],
                          tpot_mean=pm, tpot_p50=pq[0], tpot_p90=pq[1], tpot_p99=pq[2],
                          e2e_mean=em, e2e_p50=eq[0], e2e_p90=eq[1], e2e_p99=eq[2],
                          batch=jnp.float32(0.0), utilization=jnp.float32(0.0), stable=done > 0.99)


simulate_jit = jax.jit(simulate, static_argnames=("opts", "slots", "iterations", "closed"))


@functools.partial(jax.jit, static_argnames=("opts", "n_requests", "slots", "iterations"))
def simulate_sampled(model, hw, par, wl, srv, key, opts: Options = Options(), warmup=0.2, *,
                     n_requests: int = 512, slots: int = 64, iterations: int = 4096):
    """`sample_requests` then `simulate`: a function of arrays only, so it
    vmaps over any leaf (e.g. `jax.vmap(simulate_sampled, in_axes=(None, hw_axes, ...))`)."""
    reqs = sample_requests(key, wl, srv, n_requests)
    return simulate(model, hw, par, wl, srv, reqs, opts, warmup, slots=slots, iterations=iterations)


__all__ = ["Requests", "sample_requests", "simulate", "simulate_jit", "simulate_sampled", "summarize"]
