"""Latency under Poisson load: an analytical approximation of continuous
batching with chunked prefill (smooth, differentiable, one fixed point per
configuration), for sweeps and co-design; `jaxplat.serving.simulator`
checks it with a request-level simulation.
"""

import jax
import jax.numpy as jnp

from jaxplat.cost import safe_div
from jaxplat.model import Hardware, Model, Options, Parallel, Workload, replace
from jaxplat.serving.iteration import capacity, iteration_time
from jaxplat.serving.settings import SATURATED, Serving, ServingMetrics, lognormal_quantile


def _ceil(x, smooth):
    c = jnp.ceil(x)
    return x + jax.lax.stop_gradient(c - x) if smooth else c


_Q = (0.5, 0.9, 0.99)  # the quantiles reported (p50, p90, p99)
_KMAX = 16  # whole prompts per iteration the prompt chain tracks (more are lumped into the last state)


def chunk_times(model, hw, par, wl, opts, n_dec, ctx, chunk, ctx0):
    """Iteration times (s) with 0, 1 and 2 identical prompt chunks next to
    n_dec decodes, one vmapped trace: (decode-only, + one chunk, + two)."""
    one = jnp.ones((1,), jnp.float32)
    fn = lambda c, n: iteration_time(model, hw, par, wl, opts, n_dec, ctx, c * one, ctx0 * one, n * one)  # noqa: E731
    t = jax.vmap(fn)(jnp.stack([jnp.zeros_like(chunk), chunk, chunk]), jnp.array([1.0, 1.0, 2.0]))
    return t[0], t[1], t[2]


def prompt_chain(lam, t0, e1, e2, kmax: int = _KMAX):
    """Stationary iteration length of in-flight batching with whole prompts.

    The prompts that arrive (Poisson, rate lam) during iteration n all join
    iteration n + 1, so K_{n+1} | T_n ~ Poisson(lam T_n): a Markov chain on
    the number of prompts K. An iteration with K prompts lasts
        T(K) = t0 + e1 min(K, 1) + e2 max(K - 1, 0)
    (`chunk_times`: the first prompt's GEMMs partly hide under the decode
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
        of prompts (`prompt_chain`, which also captures that a second prompt
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
        # the decode rows hold ceil(b) sequences (operators.build_table): the
        # chunk takes the rest of the budget, so an iteration never exceeds it
        return jnp.minimum(jnp.where(chunked, jnp.maximum(srv.chunk - _ceil(b, opts.smooth), 1.0), prompt), prompt)

    def pieces(b_seen, prompt, b_chunk):
        """Iteration times at batch b_seen with chunks sized for batch b_chunk:
        (t_dec, extra time of a first chunk, of a second one, tokens per chunk)."""
        c = per_chunk(b_chunk, prompt)
        # a chunk sees on average half of the rest of its prompt cached
        t_d, t_1, t_2 = chunk_times(model, hw, par, wl, opts, b_seen, ctx, c, jnp.maximum(prompt - c, 0.0) / 2.0)
        return t_d, jnp.maximum(t_1 - t_d, 0.0), jnp.maximum(t_2 - t_1, 0.0), c

    def prompt_work(e1, e2, c):
        """Share of the time spent on prompts: chunked, rate x Delta; whole,
        rate x the larger per-prompt cost (the chain's drift is below one
        prompt per iteration while rate x e2 < 1)."""
        return lam * jnp.where(chunked, safe_div(P, c) * e1, jnp.maximum(e1, e2))

    def step(_, tpot):
        b = lam * steps * tpot
        t_d, e1, e2, c = pieces(1.0 + b, P, 1.0 + b)  # decodes and chunk within the budget
        slack = 1.0 - prompt_work(e1, e2, c)
        whole, _, _ = prompt_chain(lam, t_d, e1, e2)
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
    t_all, e1_all, e2_all, c_all = jax.vmap(lambda bs, pr: pieces(bs, pr, bs))(seen, jnp.tile(prompts, 2))
    t_d, extra, e2, c = t_all[:4], e1_all[:4], e2_all[:4], c_all[:4]
    t_j, extra_j, e2_j = t_all[4:], e1_all[4:], e2_all[4:]
    work = prompt_work(extra[0], e2[0], c[0])
    mean_w, sq_w, tail = prompt_chain(lam, t_d[0], extra[0], e2[0])
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
    wait = busy * resid + fifo + joined  # mean, s
    # TTFT quantiles: the prompt's own service at its length quantile plus
    # the wait's quantile. The wait is 0 with probability 1 - busy, else
    # about exponential (the M/G/1 waiting time's exponential tail and
    # Kingman's heavy-traffic limit, Kleinrock vol. 2 sec. 2.2), so its
    # q-quantile is (wait / busy) ln(busy / (1 - q)) above 1 - busy.
    # tests/test_serving.py holds it against the simulator's percentiles.
    p_wait = jnp.clip(busy, 1e-6, 1.0)
    wait_q = safe_div(wait, p_wait) * jnp.log(jnp.maximum(p_wait / (1.0 - jnp.array(_Q)), 1.0))
    ttfts = service + jnp.concatenate([wait[None], wait_q])

    # TPOT quantiles: K ~ Poisson(m) prompts interrupt O - 1 steps (normal
    # approx.), each adding its mean extra time (whole prompts: the chain's
    # (E[T] - t_dec) / (rate E[T]), between e1 and e2).
    q_steps = jnp.maximum(steps, 1.0)
    m = lam * safe_div(P, c[0]) * tpot * q_steps
    per_prompt = jnp.where(chunked, extra[0], safe_div(mean_w - t_d[0], lam * mean_w))
    tpot_q = t_d[0] + per_prompt * jnp.maximum(m + zs * jnp.sqrt(m), 0.0) / q_steps
    out_q = lognormal_quantile(O, srv.output_cv, zs)
    e2e_q = e2e_quantiles(ttfts[0], ttfts[1:], tpot, tpot_q, out_q)
    e2e_mean = ttfts[0] + steps * tpot
    sat = lambda x: jnp.where(stable, x, SATURATED)  # noqa: E731
    return ServingMetrics(
        ttft_mean=sat(ttfts[0]), ttft_p50=sat(ttfts[1]), ttft_p90=sat(ttfts[2]), ttft_p99=sat(ttfts[3]),
        tpot_mean=sat(tpot), tpot_p50=sat(tpot_q[0]), tpot_p90=sat(tpot_q[1]), tpot_p99=sat(tpot_q[2]),
        e2e_mean=sat(e2e_mean), e2e_p50=sat(e2e_q[0]), e2e_p90=sat(e2e_q[1]), e2e_p99=sat(e2e_q[2]),
        batch=b, utilization=busy, stable=stable)


def e2e_quantiles(ttft_mean, ttft_q, tpot_mean, tpot_q, out_q):
    """End-to-end quantiles [3] from the TTFT and TPOT ones: a request of
    the quantile output length at the mean latencies, plus the two
    deviations from the mean (TTFT's, and (output - 1) x TPOT's) added as
    independent (root of the sum of squares, with the sign of their sum)."""
    steps_q = jnp.maximum(out_q - 1.0, 0.0)
    d1, d2 = ttft_q - ttft_mean, steps_q * (tpot_q - tpot_mean)
    dev = jnp.sign(d1 + d2) * jnp.sqrt(d1 * d1 + d2 * d2 + 1e-30)  # + 1e-30 s^2: a finite gradient at 0
    return ttft_mean + steps_q * tpot_mean + dev


def slo_met(sm: ServingMetrics, wl: Workload, q) -> jax.Array:
    """Whether the q-quantile TTFT and TPOT meet the workload's SLOs
    (q snapped to the nearest of p50 / p90 / p99)."""
    ttft = jnp.where(q < 0.7, sm.ttft_p50, jnp.where(q < 0.95, sm.ttft_p90, sm.ttft_p99))
    tpot = jnp.where(q < 0.7, sm.tpot_p50, jnp.where(q < 0.95, sm.tpot_p90, sm.tpot_p99))
    return sm.stable & (ttft <= wl.ttft_slo) & (tpot <= wl.tpot_slo)


def goodput(model: Model, hw: Hardware, par: Parallel, wl: Workload, srv: Serving,
            opts: Options = Options(), max_batch=None, steps: int = 30, also=None):
    """Highest arrival rate (requests/s per replica) whose srv.slo_quantile
    TTFT and TPOT meet wl.ttft_slo and wl.tpot_slo (DistServe's goodput), by
    bisection in log rate over [1e-4, 1e4] req/s (30 steps: 2e-8 relative).
    0 if even 1e-4 req/s misses. Latency grows with the rate, so the rates
    that meet the SLOs form an interval from 0. Not differentiable (use the
    queueing metrics with softplus SLO penalties for gradients).

    also: None, or rates (requests/s, shape [K]) at which the caller wants
    the queueing metrics too; they are evaluated beside the bisection's
    probes in its one vmapped trace of the queueing model (a second trace
    would compile as long again), and goodput returns (rate, ServingMetrics
    with a leading axis K). Inside the loop they are evaluated at every step
    (2 + K rates a step instead of 2): more run time than evaluating them
    once, traded for the second trace's compile, which is longer by orders
    of magnitude (`estimate --rate` cold start: docs/index.md).
    """
    if max_batch is None:
        max_batch, _, _ = capacity(model, hw, par, wl, srv, opts)
    lo0, hi0 = jnp.log(jnp.float32(1e-4)), jnp.log(jnp.float32(1e4))
    extra = jnp.zeros((0,), jnp.float32) if also is None else jnp.asarray(also, jnp.float32)
    probe = jax.vmap(lambda r: queueing(model, hw, par, wl, replace(srv, rate=r), opts, max_batch))
    head = lambda q: jax.tree.map(lambda x: x[:2], q)  # noqa: E731 (the bisection's two probes)
    tail = lambda q: jax.tree.map(lambda x: x[2:], q)  # noqa: E731 (the rates in `also`)

    def body(_, state):
        lo, hi, _, kept = state
        mid = (lo + hi) / 2.0
        q = probe(jnp.concatenate([jnp.exp(jnp.stack([mid, lo0])), extra]))  # one trace of the queueing model
        good, base = slo_met(head(q), wl, srv.slo_quantile)
        return jnp.where(good, mid, lo), jnp.where(good, hi, mid), base, None if also is None else tail(q)
    kept0 = None
    if also is not None:  # the `also` metrics' place in the carry, shaped by tracing the probe (not compiling it)
        k = extra.shape[0]
        shapes = jax.eval_shape(probe, jnp.zeros(2 + k, jnp.float32))
        kept0 = jax.tree.map(lambda a: jnp.zeros((k, *a.shape[1:]), a.dtype), shapes)
    lo, _, base, kept = jax.lax.fori_loop(0, steps, body, (lo0, hi0, jnp.bool_(False), kept0))
    rate = jnp.where(base, jnp.exp(lo), 0.0)
    return rate if also is None else (rate, kept)
