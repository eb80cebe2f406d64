"""Serving dynamics on top of the one cost model: capacity, continuous batching,
chunked prefill, queueing under Poisson load, goodput, disaggregated pools and
speculative decoding.

Every time here comes from the operator table (`operators.build_table`) and
its roofline (`inference.row_components`): an engine iteration that decodes
`n_dec` sequences and prefills some prompt chunks is one *merged* table
(`merge_tables`): the decode step's rows and the chunk's prefill rows, with
weights read once (fused GEMMs over all tokens of the iteration, as vLLM,
TensorRT-LLM and SGLang run them) and attention costed per sequence.

Two ways to get latencies under load, which check each other:
  * `queueing`: an analytical approximation (smooth, differentiable, one
    fixed point per configuration), for sweeps and co-design;
  * `jaxplat.simulator.simulate`: a request-level simulation of the
    scheduler in JAX (`lax.scan` over iterations), vmappable over configs.

Units: SI (seconds, bytes, requests/s, tokens/s).
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat._pytree import pytree_dataclass, replace
from jaxplat.hardware import Hardware
from jaxplat.inference import evaluate, pipeline_round, row_components
from jaxplat.memory import kv_read_mask
from jaxplat.model import Model
from jaxplat.operators import NUMERIC, OpTable, build_table, microbatching
from jaxplat.options import Options
from jaxplat.parallel import Parallel
from jaxplat.roofline import combine, safe_div
from jaxplat.workload import Workload

DEFAULT_MEM_FRACTION = 0.9   # vLLM's gpu_memory_utilization default
DEFAULT_TOKEN_BUDGET = 8192.0  # TensorRT-LLM's default max_num_tokens per iteration
SATURATED = 1e4  # s: latency reported for an unstable (overloaded) configuration


@pytree_dataclass
class Serving:
    """How requests arrive and how the engine schedules them (float leaves).

    Attributes:
      rate: Poisson arrival rate, requests/s per replica (0: offline, max load).
      prompt_cv, output_cv: coefficient of variation of the prompt and output
        lengths (log-normal around the workload's prompt/output means; 0 =
        fixed lengths).
      max_batch: cap on running sequences (0: memory capacity decides).
      chunk: token budget per iteration for chunked prefill (Sarathi-Serve,
        Agrawal et al. OSDI 2024; vLLM max_num_batched_tokens), decodes
        included; 0: whole prompts join an iteration (in-flight batching).
      mem_fraction: usable fraction of the memory left after weights and
        activations for the KV cache (TensorRT-LLM
        kv_cache_free_gpu_mem_fraction; vLLM's gpu_memory_utilization).
      slo_quantile: fraction of requests that must meet the SLOs for
        goodput (DistServe, Zhong et al. OSDI 2024, uses 0.9).
    """

    rate: jax.Array
    prompt_cv: jax.Array
    output_cv: jax.Array
    max_batch: jax.Array
    chunk: jax.Array
    mem_fraction: jax.Array
    slo_quantile: jax.Array


def serving(rate=0.0, prompt_cv=0.0, output_cv=0.0, max_batch=0.0, chunk=0.0,
            mem_fraction=DEFAULT_MEM_FRACTION, slo_quantile=0.9) -> Serving:
    """Build `Serving` with float32 leaves (one compiled program for all values)."""
    f = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return Serving(f(rate), f(prompt_cv), f(output_cv), f(max_batch), f(chunk), f(mem_fraction), f(slo_quantile))


@pytree_dataclass
class ServingMetrics:
    """Latency statistics under load, seconds (mean, p50, p90, p99).

    batch: mean running decodes. utilization: fraction of time a request
    is in the system. stable: the engine keeps up with the arrivals.
    """

    ttft_mean: jax.Array
    ttft_p50: jax.Array
    ttft_p90: jax.Array
    ttft_p99: jax.Array
    tpot_mean: jax.Array
    tpot_p50: jax.Array
    tpot_p90: jax.Array
    tpot_p99: jax.Array
    e2e_mean: jax.Array
    e2e_p50: jax.Array
    e2e_p90: jax.Array
    e2e_p99: jax.Array
    batch: jax.Array
    utilization: jax.Array
    stable: jax.Array


# ------------------------------------------------------------------ lengths

def lognormal_params(mean, cv):
    """(mu, sigma) of a log-normal with this mean and coefficient of variation."""
    s2 = jnp.log1p(cv * cv)
    return jnp.log(mean) - s2 / 2.0, jnp.sqrt(s2)


def lognormal_quantile(mean, cv, z):
    """Quantile at standard-normal score z (cv = 0 gives `mean`)."""
    mu, sigma = lognormal_params(mean, cv)
    return jnp.exp(mu + sigma * z)


def normal_score(q):
    """Standard-normal quantile of a traced probability q in (0, 1)."""
    return jnp.sqrt(2.0) * jax.scipy.special.erfinv(2.0 * q - 1.0)


# ----------------------------------------------------------------- capacity

def capacity(model: Model, hw: Hardware, par: Parallel, wl: Workload, srv: Serving,
             opts: Options = Options(), token_budget=DEFAULT_TOKEN_BUDGET):
    """Largest batch whose weights, activations and KV cache fit per chip.

    KV pool = mem_fraction x (capacity - weights - activations), activations
    of one iteration at `token_budget` tokens (TensorRT-LLM reserves them
    before sizing its KV pool). Each sequence holds prompt + output tokens of
    KV (beams share the prompt). Capped by srv.max_batch when that is > 0.
    Returns (max_batch, kv_bytes_per_sequence, kv_pool_bytes), floats.
    """
    one = evaluate(model, hw, par, replace(wl, batch=1.0), opts)
    act = evaluate(model, hw, par, replace(wl, batch=1.0, prompt=token_budget, output=1.0), opts).activation_bytes
    pool = jnp.maximum(srv.mem_fraction * (one.capacity_bytes - one.weights_bytes - act), 0.0)
    b = jnp.floor(safe_div(pool, one.kv_bytes))
    if opts.smooth:  # straight-through floor: exact forward, gradient of the ratio
        raw = safe_div(pool, one.kv_bytes)
        b = raw + jax.lax.stop_gradient(b - raw)
    b = jnp.where(srv.max_batch > 0, jnp.minimum(b, srv.max_batch), b)
    return b, one.kv_bytes, pool


def max_load(model, hw, par, wl, srv, opts: Options = Options(), token_budget=DEFAULT_TOKEN_BUDGET):
    """Offline (max-load) throughput: every slot busy at the capacity batch.

    Continuous batching keeps `max_batch` sequences in flight; in steady
    state a slot spends one prefill and output - 1 decode steps per request,
    so output tokens/s equal the static batch's at that size
    (`evaluate(...).throughput`, whose decode sum runs over the staggered
    contexts). Returns (max_batch, throughput tok/s of all dp replicas).
    """
    b, _, _ = capacity(model, hw, par, wl, srv, opts, token_budget)
    m = evaluate(model, hw, par, replace(wl, batch=jnp.maximum(b, 1.0)), opts)
    return b, jnp.where(b >= 1.0, m.throughput, 0.0)


# ------------------------------------------------------- iteration time

# Columns that describe a row rather than its work: kept by `merge_tables`.
_KEPT = ("count", "stage", "on_a", "on_w", "on_o", "comm_n", "comm_s", "k", "n")


def merge_tables(dec: OpTable, pre: OpTable) -> OpTable:
    """One engine iteration: the decode table's rows fused with the prefill's.

    Rows with the same name (GEMMs, norms, collectives...) run once over
    all tokens: FLOPs, activation bytes, GEMM m and collective payloads add,
    weight bytes are read once (max). Structural columns that say how often
    and where a row runs (count, stage, on-chip flags, the collective's group
    size comm_n and rank stride comm_s, GEMM k and n) are the same in both
    tables and are kept (max), never added. Rows only in one table are kept.
    Names are static, so the row matching happens at trace time.
    """
    index = {n: i for i, n in enumerate(dec.names)}
    extra = [i for i, n in enumerate(pre.names) if n not in index]
    where = np.full(len(dec.names), -1)
    for i, n in enumerate(pre.names):
        if n in index:
            where[index[n]] = i
    has = jnp.asarray(where >= 0, jnp.float32)
    take = np.maximum(where, 0)
    cols = {}
    for key in NUMERIC:
        d, p = getattr(dec, key), getattr(pre, key)
        pm = p[take] * has
        if key in ("w0", "w1", "stored"):
            merged = jnp.maximum(d, pm)
        elif key in _KEPT:
            merged = jnp.where(has > 0, jnp.maximum(d, pm), d)
        else:
            merged = d + pm
        cols[key] = jnp.concatenate([merged, p[np.array(extra, int)]]) if extra else merged
    names = tuple(dec.names) + tuple(pre.names[i] for i in extra)
    groups = tuple(dec.groups) + tuple(pre.groups[i] for i in extra)
    kinds = tuple(dec.comm_kinds) + tuple(pre.comm_kinds[i] for i in extra)
    return OpTable(**cols, names=names, groups=groups, comm_kinds=kinds)


def _prefill_attention(model, par, wl, opts, chunk, ctx0, copies):
    """KV-row columns of prompt chunks: [chunks] tokens after ctx0 cached ones.

    FLOPs and activation bytes of causal attention over a chunk are the
    difference of the whole-prefix totals (pairs(c0 + C) - pairs(c0)); the
    chunk reads the KV of all c0 + C tokens once (FlashAttention streams it
    per query block). `copies` [chunks]: identical sequences per entry.
    Returns a dict of [rows] columns summed over chunks.
    """
    def cols(p):
        t = build_table(model, par, replace(wl, batch=1.0, prompt=p, beams=1.0), "prefill", opts)
        return {k: getattr(t, k) for k in ("f0", "a0", "w0", "o0")}
    both = jax.vmap(cols)(jnp.concatenate([ctx0 + chunk, ctx0]))
    k = chunk.shape[0]
    hi = {key: v[:k] for key, v in both.items()}
    lo = {key: v[k:] for key, v in both.items()}
    busy = (chunk > 0)[:, None]
    n = copies[:, None]
    out = {k: jnp.sum(jnp.where(busy, n * (hi[k] - lo[k]), 0.0), axis=0) for k in ("f0", "a0", "o0")}
    out["w0"] = jnp.sum(jnp.where(busy, n * hi["w0"], 0.0), axis=0)
    return out


def iteration_table(model, par, wl, opts, n_dec, ctx_dec, chunk, ctx0, copies=None, logits=1.0) -> OpTable:
    """Merged table of one iteration (see `iteration_time`)."""
    copies = jnp.ones_like(chunk) if copies is None else copies
    dec = build_table(model, par, replace(wl, batch=n_dec, prompt=ctx_dec, beams=1.0), "decode", opts)
    tokens = jnp.sum(copies * chunk)
    seqs = jnp.sum(copies * (chunk > 0)) * logits
    pre = build_table(model, par, replace(wl, batch=1.0, prompt=tokens, beams=1.0), "prefill", opts)
    attn = _prefill_attention(model, par, wl, opts, chunk, ctx0, copies)
    kv = jnp.asarray(kv_read_mask(pre) + np.array([n.startswith("softmax") for n in pre.names], np.float32))
    # LM head: one logit row per finished prompt, not per token (the table at
    # batch 1 has one); scale it by the prompts in the iteration.
    head = jnp.asarray(np.array([n.startswith("lm_head") for n in pre.names], np.float32))
    scale = 1.0 + head * (seqs - 1.0)
    changes = {k: jnp.where(kv > 0, attn[k], getattr(pre, k) * (1.0 if k == "w0" else scale))
               for k in ("f0", "a0", "w0", "o0")}
    changes["m"] = pre.m * scale
    changes["comm_b"] = pre.comm_b * scale
    pre = replace(pre, **changes)
    return merge_tables(dec, pre)


def iteration_time(model: Model, hw: Hardware, par: Parallel, wl: Workload, opts: Options,
                   n_dec, ctx_dec, chunk, ctx0, copies=None, logits=1.0):
    """Seconds of one engine iteration on one replica.

    Args:
      n_dec: sequences decoding one token (float scalar).
      ctx_dec: their mean KV length including the new token (attention is
        linear in it, so the mean gives the sum of their reads).
      chunk: [k] prompt tokens prefilled this iteration per sequence (0 =
        none). ctx0: [k] tokens of those prompts already in the KV cache.
      copies: [k] identical sequences per entry (default 1).
      logits: LM-head rows per prefilling sequence (1; k + 1 to verify
        speculative drafts).
    Returns:
      float scalar seconds (exact or smooth roofline per row, as `evaluate`).
    With n_dec = 0 and one chunk (P, 0) this is `evaluate`'s TTFT at batch 1;
    with no chunk it is its decode step at context ctx_dec, pipeline included.

    Pipeline parallelism: the engine keeps par.microbatches micro-batches in
    flight (vLLM's pp virtual engines), each with 1/nmb of the decodes and
    of the prompt work, and every sequence advances once per round of all
    of them: max(one pass, nmb x the busiest stage), `evaluate`'s decode rule.
    """
    nmb, _ = microbatching(par, replace(wl, batch=jnp.maximum(n_dec, 1.0)), opts)
    copies = (jnp.ones_like(chunk) if copies is None else copies) / nmb
    table = iteration_table(model, par, wl, opts, n_dec, ctx_dec, chunk, ctx0, copies, logits)
    c0, _, m0, _, comm = row_components(table, hw, replace(wl, output=0.0), opts)
    p = None if not opts.smooth else 20.0
    t = combine(c0, m0, comm, p)
    return pipeline_round(jnp.sum(table.count * t), nmb * jnp.sum(table.stage * t), p)


def decode_time(model, hw, par, wl, opts, n_dec, ctx):
    """One decode-only iteration of n_dec sequences at mean context ctx, s."""
    z = jnp.zeros((1,), jnp.float32)
    return iteration_time(model, hw, par, wl, opts, n_dec, ctx, z, z)


# ------------------------------------------------------ queueing model

def _ceil(x, smooth):
    c = jnp.ceil(x)
    return x + jax.lax.stop_gradient(c - x) if smooth else c


_KMAX = 16  # whole prompts per iteration the prompt chain tracks (more are lumped into the last state)


def _chunk_times(model, hw, par, wl, opts, n_dec, ctx, chunk, ctx0):
    """Iteration times (s) with 0, 1 and 2 identical prompt chunks next to
    n_dec decodes, one vmapped trace: (decode-only, + one chunk, + two)."""
    one = jnp.ones((1,), jnp.float32)
    fn = lambda c, n: iteration_time(model, hw, par, wl, opts, n_dec, ctx, c * one, ctx0 * one, n * one)  # noqa: E731
    t = jax.vmap(fn)(jnp.stack([jnp.zeros_like(chunk), chunk, chunk]), jnp.array([1.0, 1.0, 2.0]))
    return t[0], t[1], t[2]


def _prompt_chain(lam, t0, e1, e2, kmax: int = _KMAX):
    """Stationary iteration length of in-flight batching with whole prompts.

    The prompts that arrive (Poisson, rate lam) during iteration n all join
    iteration n + 1, so K_{n+1} | T_n ~ Poisson(lam T_n): a Markov chain on
    the number of prompts K. An iteration with K prompts lasts
        T(K) = t0 + e1 min(K, 1) + e2 max(K - 1, 0)
    (`_chunk_times`: the first prompt's GEMMs partly hide under the decode
    step's weight reads, e1 < e2 when the prefill is compute-bound; t(K)
    is linear beyond one prompt). Its stationary law pi on {0..kmax} (tail
    lumped into kmax) solves pi (I - M + 1 1^T) = 1^T, i.e. pi M = pi with
    sum(pi) = 1 as one nonsingular system; smooth in every input.
    Check: with e1 = e2 = e, E[T] = t0 / (1 - lam e) and
    E[T^2] (1 - lam^2 e^2) = t0^2 + 2 t0 e lam E[T] + e^2 lam E[T]
    (moments of T = t0 + e K, E[K | T] = lam T, Var[K | T] = lam T).
    Args: scalars, s (lam in 1/s). Returns (E[T] s, E[T^2] s^2, pi[kmax]:
    the lumped tail's probability, small when the truncation is harmless).
    """
    k = jnp.arange(kmax + 1, dtype=jnp.float32)
    t = t0 + e1 * jnp.minimum(k, 1.0) + e2 * jnp.maximum(k - 1.0, 0.0)
    mu = (lam * t)[:, None]  # [from K] mean prompts arriving during it
    pmf = jnp.exp(k * jnp.log(jnp.maximum(mu, 1e-30)) - mu - jax.scipy.special.gammaln(k + 1.0))
    trans = pmf.at[:, -1].set(jnp.maximum(1.0 - jnp.sum(pmf[:, :-1], axis=1), 0.0))
    pi = jnp.linalg.solve((jnp.eye(kmax + 1) - trans + 1.0).T, jnp.ones(kmax + 1))
    return pi @ t, pi @ (t * t), pi[-1]


def queueing(model: Model, hw: Hardware, par: Parallel, wl: Workload, srv: Serving,
             opts: Options = Options(), max_batch=None, fixed_point_steps: int = 40) -> ServingMetrics:
    """Analytical steady state of continuous batching under Poisson arrivals.

    Per replica, requests arrive at srv.rate with log-normal prompt and output
    lengths (means wl.prompt, wl.output). A running request shares every
    iteration with the others (M/G/inf: by PASTA it sees 1 + B others on
    average, B = rate x (output - 1) x TPOT, Little's law), and TPOT is the
    mean iteration length at that batch (a fixed point in TPOT):
      * chunked prefill (chunks of c = chunk - B tokens): the others' prompts
        add Delta = (P / c) x (t_mix(c) - t_dec) per arrival, a fraction
        rate x Delta of the time: TPOT = t_dec(1 + B) / (1 - rate x Delta);
      * whole prompts: every prompt that arrives during an iteration joins
        the next one, so the iteration length is a Markov chain in the number
        of prompts (`_prompt_chain`, which also captures that a second prompt
        in an iteration costs more than the first): TPOT = E[T].
    TTFT = the residual of the iteration in progress at arrival (if the
    engine is busy) + the prompt's own iterations. Whole prompts: the
    arrival lands in a length-biased iteration (residual E[T^2] / (2 E[T]),
    renewal-reward, Kleinrock, Queueing Systems vol. 1, sec. 5.2) and the
    Poisson(rate x T) others arriving in it, rate x E[T^2] / E[T] on
    average, join its prefill iteration at e2 each. Chunked: the residual of
    a two-point mix (t_dec, t_dec + Delta per chunk), ceil(P / c) iterations,
    and a first-come first-served wait for the budget (M/G/1 wait,
    Pollaczek-Khinchine). Quantiles push the prompt/output length quantiles
    through the same formulas, plus a normal approximation of the Poisson
    number of prompts interrupting a request (TPOT). Unstable loads (prompt
    work >= 1 of the time, B >= max_batch, or the whole-prompt chain's
    truncated tail > 1e-3) report SATURATED and stable = False.
    """
    lam, P, O = srv.rate, wl.prompt, wl.output
    if max_batch is None:
        max_batch, _, _ = capacity(model, hw, par, wl, srv, opts)
    # Time-average context of running requests: long outputs run longer, so
    # weight by output length: P + E[O^2] / (2 E[O]).
    ctx = P + O * (1.0 + srv.output_cv ** 2) / 2.0
    chunked = srv.chunk > 0
    steps = jnp.maximum(O - 1.0, 0.0)

    def per_chunk(b, prompt):
        return jnp.minimum(jnp.where(chunked, jnp.maximum(srv.chunk - b, 1.0), prompt), prompt)

    def pieces(b_seen, prompt, b_chunk):
        """Iteration times at batch b_seen with chunks sized for batch b_chunk:
        (t_dec, extra time of a first chunk, of a second one, tokens per chunk)."""
        c = per_chunk(b_chunk, prompt)
        # a chunk sees on average half of the rest of its prompt cached
        t_d, t_1, t_2 = _chunk_times(model, hw, par, wl, opts, b_seen, ctx, c, jnp.maximum(prompt - c, 0.0) / 2.0)
        return t_d, jnp.maximum(t_1 - t_d, 0.0), jnp.maximum(t_2 - t_1, 0.0), c

    def prompt_work(e1, e2, c):
        """Share of the time spent on prompts: chunked, rate x Delta; whole,
        rate x the larger per-prompt cost (the chain's drift is below one
        prompt per iteration while rate x e2 < 1)."""
        return lam * jnp.where(chunked, safe_div(P, c) * e1, jnp.maximum(e1, e2))

    def step(_, tpot):
        b = lam * steps * tpot
        t_d, e1, e2, c = pieces(1.0 + b, P, b)
        slack = 1.0 - prompt_work(e1, e2, c)
        whole, _, _ = _prompt_chain(lam, t_d, e1, e2)
        mean_t = jnp.where(chunked, t_d / jnp.maximum(slack, 1e-3), whole)
        return jnp.where(slack > 1e-3, mean_t, SATURATED)

    # From 0 the iteration climbs monotonically to the smallest fixed point.
    tpot = jax.lax.fori_loop(0, fixed_point_steps, step, jnp.zeros_like(P))
    b = lam * steps * tpot
    zs = jnp.array([0.0, 1.2815516, 2.3263479])  # p50, p90, p99 scores
    prompts = jnp.concatenate([P[None], lognormal_quantile(P, srv.prompt_cv, zs)])
    # [4] (mean, p50, p90, p99) prompts: times at the batch a running request
    # sees (1 + b) and at the batch a new prompt joins (b); one vmapped trace.
    seen = jnp.concatenate([jnp.full((4,), 1.0) + b, jnp.full((4,), 0.0) + b])
    t_all, e1_all, e2_all, c_all = jax.vmap(lambda bs, pr: pieces(bs, pr, b))(seen, jnp.tile(prompts, 2))
    t_d, extra, e2, c = t_all[:4], e1_all[:4], e2_all[:4], c_all[:4]
    t_j, extra_j, e2_j = t_all[4:], e1_all[4:], e2_all[4:]
    work = prompt_work(extra[0], e2[0], c[0])
    mean_w, sq_w, tail = _prompt_chain(lam, t_d[0], extra[0], e2[0])
    stable = ((work < 0.999) & (b < jnp.maximum(max_batch, 1.0)) & (tpot < SATURATED)
              & (chunked | (tail < 1e-3)))

    n_it = jnp.where(chunked, _ceil(safe_div(prompts, c), opts.smooth), 1.0)
    service = n_it * t_j + safe_div(prompts, c) * extra_j  # the prompt's own iterations
    in_sys = lam * (service[0] + steps * tpot)
    busy = 1.0 - jnp.exp(-in_sys)  # P(someone in the system), M/G/inf
    # Chunked: residual of decode iterations (t_d) and prompt iterations
    # (t_d + extra), time-weighted; pi = share of iterations with a chunk.
    pi = jnp.clip(lam * n_it[0] * tpot, 0.0, 1.0)
    mean_it = t_d[0] + pi * extra[0]
    resid_c = safe_div((1.0 - pi) * t_d[0] ** 2 + pi * (t_d[0] + extra[0]) ** 2, 2.0 * mean_it)
    # The budget is a FIFO server of prompt tokens; a prompt holds it for
    # P / c iterations' worth of tokens (the last chunk's leftover goes to
    # the next prompt), M/G/1 wait rho S (1 + cv^2) / (2 (1 - rho)).
    s_frac = safe_div(P, c[0]) * mean_it
    rho = jnp.clip(lam * s_frac, 0.0, 0.999)
    fifo = jnp.where(chunked, rho * s_frac * (1.0 + srv.prompt_cv ** 2) / (2.0 * (1.0 - rho)), 0.0)
    # Whole prompts: the length-biased iteration in progress and the prompts
    # that arrive during it, which share the arrival's prefill iteration.
    biased = safe_div(sq_w, mean_w)  # E[T^2] / E[T], s
    resid = jnp.where(chunked, resid_c, biased / 2.0)
    joined = jnp.where(chunked, 0.0, busy * lam * biased * e2_j[0])
    ttfts = busy * resid + fifo + joined + service

    # TPOT quantiles: K ~ Poisson(m) prompts interrupt O - 1 steps (normal
    # approx.), each adding its mean extra time (whole prompts: the chain's
    # (E[T] - t_dec) / (rate E[T]), between e1 and e2).
    q_steps = jnp.maximum(steps, 1.0)
    m = lam * safe_div(P, c[0]) * tpot * q_steps
    per_prompt = jnp.where(chunked, extra[0], safe_div(mean_w - t_d[0], lam * mean_w))
    tpot_q = t_d[0] + per_prompt * jnp.maximum(m + zs * jnp.sqrt(m), 0.0) / q_steps
    out_q = lognormal_quantile(O, srv.output_cv, zs)
    e2e_q = ttfts[0] + jnp.maximum(out_q - 1.0, 0.0) * tpot
    e2e_mean = ttfts[0] + steps * tpot
    sat = lambda x: jnp.where(stable, x, SATURATED)  # noqa: E731
    return ServingMetrics(
        ttft_mean=sat(ttfts[0]), ttft_p50=sat(ttfts[1]), ttft_p90=sat(ttfts[2]), ttft_p99=sat(ttfts[3]),
        tpot_mean=sat(tpot), tpot_p50=sat(tpot_q[0]), tpot_p90=sat(tpot_q[1]), tpot_p99=sat(tpot_q[2]),
        e2e_mean=sat(e2e_mean), e2e_p50=sat(e2e_q[0]), e2e_p90=sat(e2e_q[1]), e2e_p99=sat(e2e_q[2]),
        batch=b, utilization=busy, stable=stable)


def slo_met(sm: ServingMetrics, wl: Workload, q) -> jax.Array:
    """Whether the q-quantile TTFT and TPOT meet the workload's SLOs
    (q snapped to the nearest of p50 / p90 / p99)."""
    ttft = jnp.where(q < 0.7, sm.ttft_p50, jnp.where(q < 0.95, sm.ttft_p90, sm.ttft_p99))
    tpot = jnp.where(q < 0.7, sm.tpot_p50, jnp.where(q < 0.95, sm.tpot_p90, sm.tpot_p99))
    return sm.stable & (ttft <= wl.ttft_slo) & (tpot <= wl.tpot_slo)


def goodput(model: Model, hw: Hardware, par: Parallel, wl: Workload, srv: Serving,
            opts: Options = Options(), max_batch=None, steps: int = 30) -> jax.Array:
    """Highest arrival rate (requests/s per replica) whose srv.slo_quantile
    TTFT and TPOT meet wl.ttft_slo and wl.tpot_slo (DistServe's goodput), by
    bisection in log rate over [1e-4, 1e4] req/s (30 steps: 2e-8 relative).
    0 if even 1e-4 req/s misses. Latency grows with the rate, so the rates
    that meet the SLOs form an interval from 0. Not differentiable (use the
    queueing metrics with softplus SLO penalties for gradients).
    """
    if max_batch is None:
        max_batch, _, _ = capacity(model, hw, par, wl, srv, opts)
    lo0, hi0 = jnp.log(jnp.float32(1e-4)), jnp.log(jnp.float32(1e4))
    ok = jax.vmap(lambda lr: slo_met(queueing(model, hw, par, wl, replace(srv, rate=jnp.exp(lr)), opts, max_batch),
                                     wl, srv.slo_quantile))

    def body(_, state):
        lo, hi, any_ok = state
        mid = (lo + hi) / 2.0
        good, base = ok(jnp.stack([mid, lo0]))  # one trace of the queueing model
        return jnp.where(good, mid, lo), jnp.where(good, hi, mid), base
    lo, _, base = jax.lax.fori_loop(0, steps, body, (lo0, hi0, jnp.bool_(False)))
    return jnp.where(base, jnp.exp(lo), 0.0)


# --------------------------------------------------- speculative decoding

def expected_tokens(k, alpha):
    """Tokens produced per verify step with k drafted tokens, each accepted
    with probability alpha: (1 - alpha^(k+1)) / (1 - alpha) (Leviathan et
    al., ICML 2023, Eq. 1); k + 1 at alpha = 1."""
    a = jnp.clip(alpha, 0.0, 1.0 - 1e-6)
    return (1.0 - a ** (k + 1.0)) / (1.0 - a)


def speculative_tpot(model: Model, hw: Hardware, par: Parallel, wl: Workload, opts: Options,
                     batch, k, alpha, draft_model: Model | None = None, draft_fraction=0.0,
                     draft_par: Parallel | None = None):
    """Mean time per output token with speculative decoding, seconds.

    One step: k draft forward passes, then one target pass verifying k + 1
    tokens per sequence (the same shape as a prompt chunk of k + 1 tokens at
    the sequence's context: `iteration_time` with a chunk per sequence),
    producing `expected_tokens(k, alpha)` tokens. The draft is a model spec
    (its own decode step on `draft_par`, default the target's), or, with
    draft_model None, `draft_fraction` of a target decode step per drafted
    token (MTP heads: about 1 / layers per head for DeepSeek-V3's one-layer
    module; n-gram lookup: 0). Returns (tpot_spec, tpot_plain): speculation
    pays off when the first is smaller; it stops paying at large batch, where
    the verify pass becomes compute-bound.
    """
    ctx = wl.prompt + wl.output / 2.0
    plain = decode_time(model, hw, par, wl, opts, batch, ctx)
    if draft_model is None:
        draft = draft_fraction * plain
    else:
        draft = decode_time(draft_model, hw, draft_par or par, wl, opts, batch, ctx)
    # verify: `batch` sequences each with a chunk of k + 1 tokens at context
    # ctx, logits for all k + 1 of them; each reads its KV once.
    one = jnp.ones((1,), jnp.float32)
    verify = iteration_time(model, hw, par, wl, opts, jnp.float32(0.0), ctx, (k + 1.0) * one, ctx * one,
                            batch * one, k + 1.0)
    step = k * draft + verify
    return step / expected_tokens(k, alpha), plain


# --------------------------------------------------- disaggregation

def kv_transfer_time(model, hw, par_prefill, wl, opts, level: int = 1):
    """Seconds to send one prompt's KV cache from a prefill chip to the
    decode pool over network level `level` (each prefill chip sends its
    shard in parallel: bytes per chip / derated link bandwidth + latency)."""
    m = evaluate(model, hw, par_prefill, replace(wl, batch=1.0, output=0.0), opts)
    return hw.net_latency[level] + safe_div(m.kv_bytes, hw.net_bw[level] * hw.eff_network)


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
    wait_q = safe_div(wait, jnp.maximum(rho, 1e-6)) * jnp.log(jnp.maximum(rho / (1.0 - jnp.array([0.5, 0.9, 0.99])), 1.0))
    pq = lognormal_quantile(wl.prompt, srv.prompt_cv, zs)
    ttft_q = wait_q + s_pre * safe_div(pq, wl.prompt) + xfer
    ttft = wait + s_pre + xfer
    oq = lognormal_quantile(wl.output, srv.output_cv, zs)
    stable = rho < 0.999
    sat = lambda x: jnp.where(stable, x, SATURATED)  # noqa: E731
    steps = jnp.maximum(wl.output - 1.0, 0.0)
    return ServingMetrics(
        ttft_mean=sat(ttft), ttft_p50=sat(ttft_q[0]), ttft_p90=sat(ttft_q[1]), ttft_p99=sat(ttft_q[2]),
        tpot_mean=sat(tpot), tpot_p50=sat(tpot), tpot_p90=sat(tpot), tpot_p99=sat(tpot),
        e2e_mean=sat(ttft + steps * tpot), e2e_p50=sat(ttft_q[0] + jnp.maximum(oq[0] - 1.0, 0.0) * tpot),
        e2e_p90=sat(ttft_q[1] + jnp.maximum(oq[1] - 1.0, 0.0) * tpot),
        e2e_p99=sat(ttft_q[2] + jnp.maximum(oq[2] - 1.0, 0.0) * tpot),
        batch=lam_d * steps * tpot, utilization=rho, stable=stable)


queueing_jit = jax.jit(queueing, static_argnames=("opts", "fixed_point_steps"))
goodput_jit = jax.jit(goodput, static_argnames=("opts", "steps"))
max_load_jit = jax.jit(max_load, static_argnames=("opts",))
capacity_jit = jax.jit(capacity, static_argnames=("opts",))
iteration_time_jit = jax.jit(iteration_time, static_argnames=("opts",))

__all__ = ["Serving", "ServingMetrics", "serving", "capacity", "max_load", "iteration_time",
           "merge_tables", "queueing", "goodput", "speculative_tpot", "expected_tokens",
           "disaggregated", "kv_transfer_time", "lognormal_quantile"]
