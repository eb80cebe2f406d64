"""The queueing approximation (`serving.queueing`) against the request-level
simulator (`simulator.simulate`), on the case of tests/test_serving.py:
Llama-3.1-8B on one H100 SXM, prompt 512, output 64 tokens (fixed lengths),
max_batch 64, Poisson arrivals at 10/20/30/40 req/s, whole-prompt batching
(chunk 0) and chunked prefill (256-token budget).

The simulator runs `--seeds` independent arrival sequences of `--requests`
requests per configuration (one compiled, vmapped program). Statistics use the
requests that arrive after `--warmup` seconds (start-up from an empty engine)
and at least `--margin` seconds before the simulated clock stops (so the
window is the same whether or not the tail finished); sim figures are the mean
over seeds +- their standard deviation (the seed-to-seed spread, not the
error of the mean). Latencies in ms; batch = mean running decodes
(Little's law: rate x mean decode time); k_join (whole prompts) = mean
number of prompts in the prefill iteration a request joins, itself included
(sim: requests sharing a first-token time; queueing: 1 + utilization x rate x
E[T^2] / E[T] of `serving.prompt_chain` at the model's batch).

    .venv/bin/python experiments/serving_queue_vs_sim.py [--seeds 4] [--requests 2048] [--iterations 6144]

The seed-to-seed spread of a run the size of tests/test_serving.py's:
    ... serving_queue_vs_sim.py --rates 30 --seeds 16 --requests 512 --iterations 4096
"""

import argparse
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxplat as jp
from jaxplat import serving as S
from jaxplat.model import workload_from_dict
from jaxplat.report import table
from jaxplat.serving import simulator as M

WL = workload_from_dict({"batch": 1, "prompt": 512, "output": 64})
OPTS = jp.Options()
RATES = (10.0, 20.0, 30.0, 40.0)
CHUNKS = (0.0, 256.0)
MAX_BATCH = 64.0


@functools.partial(jax.jit, static_argnames=("n", "iterations"))
def _simulate(model, hw, rates, chunks, seeds, *, n, iterations):
    """[configs] arrivals (s) and (first token, finish) ages (s) of every request."""
    def one(rate, chunk, seed):
        srv = S.serving(rate=rate, chunk=chunk, max_batch=MAX_BATCH)
        reqs = M.sample_requests(jax.random.PRNGKey(seed), WL, srv, n)
        _, info = M.simulate(model, hw, jp.Parallel(), WL, srv, reqs, OPTS, 0.0, slots=64, iterations=iterations)
        return reqs.arrival, info["first"], info["finish"], info["sim_time"]
    return jax.vmap(one)(rates, chunks, seeds)


@jax.jit
def _queue(model, hw, rates, chunks):
    """[configs] queueing metrics and the model's k_join (whole prompts):
    1 + utilization x rate x E[T^2] / E[T] of the prompt chain at its batch."""
    def one(r, c):
        sm = S.queueing(model, hw, jp.Parallel(), WL, S.serving(rate=r, chunk=c), OPTS, jnp.float32(MAX_BATCH))
        ctx = WL.prompt + WL.output / 2.0
        t0, t1, t2 = S.chunk_times(model, hw, jp.Parallel(), WL, OPTS, 1.0 + sm.batch, ctx, WL.prompt, 0.0)
        mean, sq, _ = S.prompt_chain(r, t0, t1 - t0, t2 - t1)
        return sm, 1.0 + sm.utilization * r * sq / mean
    return jax.vmap(one)(rates, chunks)


def _sim_stats(rate, arrival, first, finish, end, warmup, margin):
    """Per-seed means over the measurement window (ms, batch, k_join), or None
    if a request in the window did not finish (unstable, or too few iterations)."""
    win = (arrival >= warmup) & (arrival <= end - margin)
    if not np.all(finish[win] < 1e29):
        return None
    ttft, e2e = first[win], finish[win]
    tpot = (e2e - ttft) / (WL.output - 1.0)
    # Prompts that finish prefill in the same iteration share its end time
    # (up to float32 rounding of the per-slot clocks, << one iteration).
    done = np.sort(arrival + first)
    group = np.concatenate([[0], np.cumsum(np.diff(done) > 1e-4)])
    size = np.bincount(group)[group]
    k_join = size[np.searchsorted(done, (arrival + first)[win])].mean()
    return {"ttft": 1e3 * ttft.mean(), "tpot": 1e3 * tpot.mean(), "e2e": 1e3 * e2e.mean(),
            "batch": rate * (e2e - ttft).mean(), "k_join": k_join, "n": int(win.sum())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--rates", type=float, nargs="+", default=list(RATES), help="arrival rates, req/s")
    ap.add_argument("--requests", type=int, default=2048, help="requests per simulation")
    ap.add_argument("--iterations", type=int, default=6144, help="engine iterations per simulation")
    ap.add_argument("--warmup", type=float, default=2.0, help="s of arrivals left out at the start")
    ap.add_argument("--margin", type=float, default=3.0, help="s of arrivals left out before the end")
    a = ap.parse_args()
    model, hw = jp.load_model("llama-3.1-8b"), jp.load_hardware("h100-sxm")
    cfg = [(r, c, s) for c in CHUNKS for r in a.rates for s in range(a.seeds)]
    rates, chunks, seeds = (jnp.array([x[i] for x in cfg]) for i in range(3))
    t0 = time.time()
    arr, first, finish, end = jax.device_get(_simulate(model, hw, rates, chunks, seeds.astype(jnp.int32),
                                                       n=a.requests, iterations=a.iterations))
    t_sim = time.time() - t0
    pairs = [(r, c) for c in CHUNKS for r in a.rates]
    q, k_join = jax.device_get(_queue(model, hw, jnp.array([p[0] for p in pairs]), jnp.array([p[1] for p in pairs])))
    rows, worst = [], {}
    for j, (r, c) in enumerate(pairs):
        idx = [i for i, x in enumerate(cfg) if x[0] == r and x[1] == c]
        st = [_sim_stats(r, arr[i], first[i], finish[i], end[i], a.warmup, a.margin) for i in idx]
        if any(s is None for s in st):
            rows.append([("whole" if c == 0 else f"chunk {c:g}"), f"{r:g}", "unfinished requests", "", "", ""])
            continue
        mode = "whole" if c == 0 else f"chunk {c:g}"
        ours = {"ttft": 1e3 * q.ttft_mean[j], "tpot": 1e3 * q.tpot_mean[j], "e2e": 1e3 * q.e2e_mean[j],
                "batch": q.batch[j], "k_join": k_join[j]}
        for k, unit in (("ttft", "ms"), ("tpot", "ms"), ("e2e", "ms"), ("batch", "seqs"), ("k_join", "prompts")):
            if k == "k_join" and c > 0:
                continue
            v = np.array([s[k] for s in st])
            err = (ours[k] / v.mean() - 1.0) * 100.0
            if k in ("ttft", "tpot", "e2e"):
                worst[k] = max(worst.get(k, 0.0), abs(err))
            rows.append([mode, f"{r:g}", f"{k} ({unit})", f"{v.mean():.3f} +- {v.std(ddof=1):.3f}",
                         "" if np.isnan(ours[k]) else f"{ours[k]:.3f}",
                         "" if np.isnan(err) else f"{err:+.1f}"])
        rows.append(["", "", f"(requests/seed: {min(s['n'] for s in st)})", "", "", ""])
    print(table(["mode", "rate (req/s)", "metric", f"sim ({a.seeds} seeds)", "queueing", "q/sim-1 (%)"], rows))
    print("largest |q/sim - 1| (%): " + ", ".join(f"{k} {v:.1f}" for k, v in worst.items()))
    print(f"simulation: {len(cfg)} runs x {a.iterations} iterations in {t_sim:.0f} s")


if __name__ == "__main__":
    main()
