"""Closed-loop load: N clients, each sending its next request the moment its
last one ends (`vllm bench serve --max-concurrency N`, AIPerf's concurrency
mode, trtllm-bench's concurrency). There is no arrival rate: the engine's own
speed sets it. Offline max load is the same loop with every slot busy.

Steady state, per replica. R = min(N, slots) requests run; the rest wait for
a slot. Slots are the KV capacity, the batch cap, and the token budget C:
each running request passes one prefill per O - 1 decode steps, so an
average iteration of n decodes also holds n P / (O - 1) prompt tokens and
n (P + O - 1) / (O - 1) <= C, i.e. R <= C O / (P + O - 1).

Prompts join in groups of g. With fixed lengths (no spread) the clients stay
in step: those admitted in one iteration finish in one iteration and come
back together, so g is as many prompts as the budget admits at once
(floor((C - n) / P), at most R). With spread lengths they drift apart and
arrive one by one, about lambda = X t per iteration of t seconds (X:
requests/s); the engine admits every waiting prompt into its next iteration
(vLLM, TensorRT-LLM and SGLang schedule all waiting requests up to the
budget, as the request simulator does), so a prefill iteration holds on
average the arrivals of one iteration given at least one, lambda / (1 -
exp(-lambda)) for Poisson arrivals, at least 1 and at most what the budget
admits at once. Counting each arrival as an iteration of its own (g = 1)
lets each prompt hide under a whole decode iteration's spare compute: at
lambda > 1 more prefill iterations a second than there are iterations.
A group's prefill is k = g P / c iterations' worth of prompt tokens, c per
iteration (c = g P for whole prompts, at most C - n when chunked); such an
iteration lasts t_m (`iteration_time` with the chunk and the other groups'
decodes), a decode-only one t_d. The group's own prefill lasts
a = j t_d + k (t_m - t_d), j the iterations it touches (1 for whole
prompts, k + 1 on average when chunks fall anywhere). During one request's decode phase D the
other groups' prefills come at rate X k (R - g) / (R g) (X: requests/s) and
each stretches an iteration by t_m - t_d, while every iteration still gives
the request one token:
    D = (O - 1) t_d / (1 - kappa X (t_m - t_d)),  kappa = k (R - g) / (R g).
Little's law with R requests in the loop, R = X (a + D), is then a
quadratic in X, solved in closed form (its smaller root); the mean number of
decoding requests n = X D feeds back into t_d and t_m, a fixed point reached
in a few steps. Reported: TPOT = D / (O - 1); TTFT = N / X - (O - 1) TPOT
(Little's law over all N, so a wait for a slot is included); throughput
X O dp. Checked against the request simulator run closed loop
(`simulator.simulate(..., closed=True)`, tests/test_engine.py).

Waves (fixed lengths under a prefill-first scheduler, srv.prefill_first:
vLLM V0 without chunked prefill, SGLang without mixed chunks). A benchmark
starts its N clients together. While prompts wait, such an engine runs
prefill-only iterations and the decodes pause, so the R running requests
are prefilled W iterations in a row (g whole prompts each, or C tokens of
chunks), then decode O - 1 steps together, finish in one iteration and come
back together: the wave never spreads. Per cycle of T = T_pre + (O - 1) t_d
(T_pre: the W prefill iterations, t_d: a decode step of R), X = R / T. The
j-th prompt's first token comes with the prefill iteration that finishes it,
ceil(j / g) (whole prompts; ceil(j P / C) chunked), so the mean TTFT inside
the engine is t_p mean_j ceil(j / g) ~ t_p (W + 1) / 2, not one iteration:
a 128-client wave of 3200-token prompts under an 8192-token budget is 64
prefill iterations, the 64th prompt pair waits for the 63 before it. TPOT =
(T - TTFT_engine) / (O - 1) (a prompt prefilled early waits for the rest of
its wave before it decodes); TTFT = N / X - (O - 1) TPOT as above.
"""

import jax
import jax.numpy as jnp

from jaxplat.cost import safe_div
from jaxplat.model import Hardware, Model, Options, Parallel, Workload, pytree_dataclass
from jaxplat.serving.iteration import capacity, iteration_time
from jaxplat.serving.settings import Serving, replica_budget


@pytree_dataclass
class ClosedLoop:
    """Closed-loop steady state, SI units.

    rate: requests/s per replica (X). ttft, tpot: mean seconds (TTFT includes
    any wait for a slot). throughput: output tokens/s of all dp replicas.
    running: requests in the engine (R). batch: mean decoding requests.
    group: prompts prefilled together (g). feasible: one request fits.
    """

    rate: jax.Array
    ttft: jax.Array
    tpot: jax.Array
    throughput: jax.Array
    running: jax.Array
    batch: jax.Array
    group: jax.Array
    feasible: jax.Array


def merged_arrivals(lam):
    """Mean prompts an engine admits together when lam arrive per iteration
    at random (Poisson): the mean count given at least one, lam / (1 -
    exp(-lam)); 1 as lam -> 0, lam when large."""
    lam = jnp.maximum(lam, 1e-4)
    return lam / -jnp.expm1(-lam)


def _times(model, hw, par, wl, srv, opts, n, running, in_step, lam):
    """(t_d, t_m, k, g): decode-only and prefill iteration seconds, prefill
    iterations per group and group size, at n decoding requests and lam
    arrivals per iteration (spread lengths)."""
    P, C = wl.prompt, replica_budget(srv, par)
    avail = jnp.maximum(C - jnp.ceil(n), 1.0)  # the decode rows hold ceil(n) sequences
    at_once = jnp.clip(jnp.floor(avail / P), 1.0, running)  # whole prompts the budget admits together
    g = jnp.where(in_step, at_once, jnp.clip(merged_arrivals(lam), 1.0, at_once))
    c = jnp.where(srv.chunk > 0, jnp.minimum(g * P, avail), g * P)  # prompt tokens per prefill iteration
    k = g * P / c  # iterations' worth of the group's prompt tokens
    # one prompt's tokens in it: a chunk (at most its rank's budget), or whole prompts
    per = jnp.minimum(c, jnp.where(srv.chunk > 0, jnp.minimum(P, srv.budget), P))
    others = n * jnp.maximum(running - g, 0.0) / running  # decodes beside a group's prefill
    one = jnp.ones((1,), jnp.float32)
    ctx = P + wl.output / 2.0
    fn = lambda nd, tok: iteration_time(model, hw, par, wl, opts, nd, ctx, tok * one,  # noqa: E731
                                        (P - per) / 2.0 * one, safe_div(c, per) * one)
    t = jax.vmap(fn)(jnp.stack([n, others]), jnp.stack([jnp.zeros_like(per), per]))
    return t[0], t[1], k, g


def _wave(model, hw, par, wl, srv, opts, running):
    """(X requests/s, mean TTFT in the engine s, cycle s) of a wave of
    `running` requests under a prefill-first scheduler (module docstring)."""
    P, R = wl.prompt, running
    dsteps = jnp.maximum(wl.output - 1.0, 1.0)
    C = replica_budget(srv, par)
    chunked = srv.chunk > 0
    g = jnp.clip(jnp.floor(C / P), 1.0, R)  # whole prompts per prefill-only iteration
    per_it = jnp.where(chunked, jnp.minimum(C, R * P), g * P)  # prompt tokens per full iteration
    total = R * P
    full = jnp.floor(total / per_it + 1e-4)  # full prefill iterations (1e-4: float slack on exact multiples)
    rest = jnp.maximum(total - full * per_it, 0.0)  # tokens of a last, partial one
    rest = jnp.where(rest < 0.5, 0.0, rest)
    one = jnp.ones((1,), jnp.float32)
    # One prompt's tokens per iteration entry: a chunk of C (ctx0: on average
    # half the prompt before it), or whole prompts (copies of one prompt).
    per = jnp.minimum(per_it, jnp.where(chunked, jnp.minimum(P, srv.budget), P))

    # Prefill-only iterations of `tok` prompt tokens (a full one, the partial
    # last one) and a decode step of R, as one vmapped trace (a third copy of
    # the iteration's program would add a third to the compile time).
    tok = jnp.stack([per_it, jnp.maximum(rest, 1.0), jnp.zeros_like(rest)])
    p1 = jnp.minimum(jnp.maximum(tok, 1.0), per).at[2].set(0.0)
    n_dec = jnp.stack([0.0, 0.0, R]).astype(jnp.float32)
    ctx = jnp.stack([P, P, P + wl.output / 2.0])
    copies = jnp.where(p1 > 0, safe_div(tok, p1), 1.0)
    fn = lambda nd, cx, c, c0, k: iteration_time(model, hw, par, wl, opts, nd, cx, c * one, c0 * one,  # noqa: E731
                                                  k * one)
    t_full, t_rest, t_d = jax.vmap(fn)(n_dec, ctx, p1, jnp.where(p1 > 0, (P - p1) / 2.0, 0.0), copies)
    t_rest = jnp.where(rest > 0, t_rest, 0.0)
    t_pre = full * t_full + t_rest
    # Whole prompts: R = q g + r; sum_j ceil(j / g) = g q (q + 1) / 2 + r (q + 1),
    # the r prompts of the partial iteration finish at t_pre.
    q, r = full, jnp.maximum(R - full * g, 0.0)
    whole = (t_full * g * q * (q + 1.0) / 2.0 + r * t_pre) / R
    # Chunked: prompt j ends in iteration ceil(j P / C); mean ~ (R + 1) P / (2 C)
    # + 1/2 (the ceiling's mean round-up), at most the whole prefill.
    chunks = jnp.minimum(((R + 1.0) * P / (2.0 * per_it) + 0.5) * t_full, t_pre)
    a = jnp.where(chunked, chunks, whole)
    cycle = t_pre + dsteps * t_d
    return R / cycle, a, cycle


def closed_loop(model: Model, hw: Hardware, par: Parallel, wl: Workload, srv: Serving, concurrency,
                opts: Options = Options(), max_batch=None, steps: int = 8) -> ClosedLoop:
    """Steady state of `concurrency` clients per replica in a closed loop
    (module docstring). srv.rate is ignored; fixed lengths (srv.prompt_cv =
    srv.output_cv = 0) keep the clients in step, in one wave where
    srv.prefill_first. `max_batch`: slots from
    memory if None (`capacity`). `steps`: fixed-point steps on the number of
    decoding requests and the arrivals per iteration (it moves by under
    1e-3 after 6 in the tests' cases).
    """
    N = jnp.asarray(concurrency, jnp.float32)
    if max_batch is None:
        max_batch, _, _ = capacity(model, hw, par, wl, srv, opts)
    P, O = wl.prompt, wl.output
    dsteps = jnp.maximum(O - 1.0, 1.0)
    budget_slots = replica_budget(srv, par) * O / (P + dsteps)
    running = jnp.maximum(jnp.minimum(jnp.minimum(N, max_batch), budget_slots), 1.0)
    in_step = (srv.prompt_cv == 0) & (srv.output_cv == 0)

    def solve(n, lam):
        t_d, t_m, k, g = _times(model, hw, par, wl, srv, opts, n, running, in_step, lam)
        d = jnp.maximum(t_m - t_d, 0.0)
        # Own prefill: the iterations the prompt is in (whole: one; chunked:
        # k + 1 on average, a chunk boundary falling anywhere), each at least
        # a decode iteration, plus the extra work of its tokens.
        touched = jnp.where(srv.chunk > 0, k + 1.0, 1.0)
        a, b = touched * t_d + k * d, dsteps * t_d
        kd = k * jnp.maximum(running - g, 0.0) / (running * g) * d  # kappa (t_m - t_d)
        s = a + b + running * kd
        x = 2.0 * running / (s + jnp.sqrt(jnp.maximum(s * s - 4.0 * a * kd * running, 0.0)))
        tpot = t_d / jnp.maximum(1.0 - kd * x, 1e-6)
        return x, tpot, g

    def step(_, state):  # one traced copy of the iteration times
        x, tpot, g = solve(state[0], state[1] * state[2])  # arrivals per iteration: X x TPOT
        return jnp.clip(x * dsteps * tpot, 0.0, running), x, tpot, g
    zero = jnp.zeros_like(running)
    _, x, tpot, g = jax.lax.fori_loop(0, steps, step, (running * dsteps / (dsteps + 1.0), zero, zero, zero))
    # Fixed lengths under a prefill-first scheduler: the clients move in one wave.
    wave = in_step & (srv.prefill_first > 0)
    xw, aw, cw = _wave(model, hw, par, wl, srv, opts, running)
    x = jnp.where(wave, xw, x)
    tpot = jnp.where(wave, (cw - aw) / dsteps, tpot)
    ttft = jnp.maximum(safe_div(N, x) - dsteps * tpot, 0.0)
    feasible = max_batch >= 1.0
    return ClosedLoop(rate=jnp.where(feasible, x, 0.0), ttft=ttft, tpot=tpot,
                      throughput=jnp.where(feasible, par.dp * x * O, 0.0), running=running,
                      batch=x * dsteps * tpot, group=g, feasible=feasible)


def max_load(model, hw, par, wl, srv, opts: Options = Options(), max_batch=None):
    """Offline (max-load) throughput: the closed loop with every slot busy
    (as many clients as the engine has slots; queued requests beyond them
    change nothing). Returns (slots from memory and the batch cap,
    throughput tok/s of all dp replicas)."""
    if max_batch is None:
        max_batch, _, _ = capacity(model, hw, par, wl, srv, opts)
    cl = closed_loop(model, hw, par, wl, srv, jnp.maximum(max_batch, 1.0), opts, max_batch)
    return max_batch, cl.throughput


__all__ = ["ClosedLoop", "closed_loop", "max_load"]
