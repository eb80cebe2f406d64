"""Engine realism: closed-loop concurrency against the request simulator run
closed loop, its limits worked by hand, the token budget and paged-KV blocks."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxplat as jp
from jaxplat import serving as S
from jaxplat.model import workload_from_dict
from jaxplat.serving import simulator as M

OPTS = jp.Options()
WL = workload_from_dict({"batch": 1, "prompt": 512, "output": 64})
# (clients, chunk, length CV, max_num_tokens): in step with whole prompts
# (4 join one iteration; 3 at a time under a 2048-token budget), chunked, and
# spread lengths (the clients drift apart).
CASES = np.array([[4, 0, 0, 8192], [16, 0, 0, 2048], [16, 256, 0, 8192], [16, 512, 0.5, 8192]], np.float32)


@functools.partial(jax.jit, static_argnames=())
def _both(model, hw, cases):
    def one(c):
        n, chunk, cv, budget = c[0], c[1], c[2], c[3]
        srv = S.serving(chunk=chunk, prompt_cv=cv, output_cv=cv, max_num_tokens=budget, max_batch=64.0)
        model_cl = S.closed_loop(model, hw, jp.Parallel(), WL, srv, n, OPTS)
        sim_srv = S.serving(chunk=chunk, prompt_cv=cv, output_cv=cv, max_num_tokens=budget, max_batch=n)
        reqs = M.sample_requests(jax.random.PRNGKey(0), WL, sim_srv, 512)
        sim, _ = M.simulate(model, hw, jp.Parallel(), WL, sim_srv, reqs, OPTS, 0.3, slots=16, iterations=8192,
                            closed=True)
        return model_cl, sim
    return jax.vmap(one)(cases)


@pytest.fixture(scope="module")
def runs():
    model, hw = jp.load_model("llama-3.1-8b"), jp.load_hardware("h100-sxm")
    return model, hw, jax.device_get(_both(model, hw, jnp.asarray(CASES)))


def test_closed_loop_matches_simulator(runs):
    _, _, (cl, sim) = runs
    # In a closed loop with no think time a client's cycle is its request's
    # end-to-end latency, so the simulator's throughput is N x O / E2E.
    sim_thr = CASES[:, 0] * 64 / sim.e2e_mean
    np.testing.assert_allclose(cl.throughput, sim_thr, rtol=0.05)
    np.testing.assert_allclose(cl.tpot, sim.tpot_mean, rtol=0.05)
    np.testing.assert_allclose(cl.ttft, sim.ttft_mean, rtol=0.10)
    # clients in step share their prefill iteration: TTFT well above one prompt's
    # spread lengths under a 512-token chunk: one prompt's chunk per iteration
    assert cl.group[0] == 4 and cl.group[1] == 3 and cl.group[3] == 1


def test_waiting_prompts_share_an_iteration():
    # 48 clients with spread lengths and short outputs (16 tokens) come back
    # ~3 per iteration; the engine (and the request simulator, the oracle
    # here) admits all waiting prompts into its next iteration. Counting each
    # prompt as an iteration of its own hid each under a whole decode
    # iteration's spare compute: throughput +17%, TTFT -69% against the
    # simulator. With the merged arrivals: within 10% and 30% (the mean-field
    # group misses the spread of the group sizes: the iteration time is
    # convex in them, max of compute and memory).
    model, hw = jp.load_model("llama-3.1-8b"), jp.load_hardware("h100-sxm")
    wl = workload_from_dict({"batch": 1, "prompt": 512, "output": 16})

    @jax.jit
    def both(n):
        srv = S.serving(prompt_cv=0.5, output_cv=0.5, max_batch=n)
        reqs = M.sample_requests(jax.random.PRNGKey(0), wl, srv, 1024)
        sim, _ = M.simulate(model, hw, jp.Parallel(), wl, srv, reqs, OPTS, 0.3, slots=48, iterations=4096,
                            closed=True)
        return S.closed_loop(model, hw, jp.Parallel(), wl, srv, n, OPTS), sim
    cl, sim = jax.device_get(both(48.0))
    # Offline max load with 48 slots is the engine with every slot busy: the
    # simulator's 48 clients (an independent step-by-step engine) are that.
    _, max_thr = jax.device_get(S.max_load_jit(model, hw, jp.Parallel(), wl, S.serving(
        prompt_cv=0.5, output_cv=0.5, max_batch=48.0), OPTS))
    np.testing.assert_allclose(max_thr, 48 * 16 / sim.e2e_mean, rtol=0.10)
    lam = cl.rate * cl.tpot  # arrivals per iteration: several
    assert lam > 2.0
    np.testing.assert_allclose(cl.group, lam / -np.expm1(-lam), rtol=1e-3)  # mean given at least one
    np.testing.assert_allclose(cl.throughput, 48 * 16 / sim.e2e_mean, rtol=0.10)
    # Jensen: the iteration time is convex in the group size, so the mean
    # field's TTFT lies below the simulator's (measured -24%), never above.
    assert -0.30 < cl.ttft / sim.ttft_mean - 1 < 0.0


def test_one_client_is_the_unloaded_request(runs):
    # One client: its prompt runs alone (evaluate's TTFT at batch 1) and each
    # step decodes it alone (evaluate's TPOT at batch 1 takes every step at its
    # own context; the loop takes the mean context, exact while linear).
    model, hw, _ = runs
    cl = jax.device_get(S.closed_loop_jit(model, hw, jp.Parallel(), WL, S.serving(), 1.0, OPTS))
    m = jax.device_get(jp.evaluate(model, hw, jp.Parallel(), WL, OPTS))
    np.testing.assert_allclose(cl.ttft, m.ttft, rtol=2e-3)
    np.testing.assert_allclose(cl.tpot, m.tpot, rtol=1e-2)
    np.testing.assert_allclose(cl.throughput, 64 / (m.ttft + 63 * m.tpot), rtol=1e-2)


def test_token_budget_caps_running_requests(runs):
    # Every running request passes one prefill per O - 1 steps: an iteration of
    # n decodes carries n P / (O - 1) prompt tokens, so n (P + O - 1) / (O - 1)
    # <= budget and R <= budget O / (P + O - 1) = 2048 x 64 / 575 = 227.9.
    model, hw, _ = runs
    srv = S.serving(max_num_tokens=2048.0)
    # (the jitted entry point the other tests call, so its program compiles once)
    cl = jax.tree.map(lambda *x: np.array(x), *(jax.device_get(S.closed_loop_jit(
        model, hw, jp.Parallel(), WL, srv, n, OPTS)) for n in (2048 * 64 / 575, 1000.0)))
    np.testing.assert_allclose(cl.running, 2048 * 64 / 575, rtol=1e-5)
    # Clients beyond the slots change no iteration, only wait: the same rate,
    # and TTFT longer by their queue, (1000 - R) / X (Little's law).
    np.testing.assert_allclose(cl.rate[1], cl.rate[0], rtol=1e-6)
    np.testing.assert_allclose(cl.ttft[1] - cl.ttft[0], (1000 - 2048 * 64 / 575) / cl.rate[0], rtol=1e-4)


def test_paged_kv_blocks_round_each_sequence_up():
    # 1000 + 1000 tokens in 32-token blocks: 63 blocks = 2016 tokens of KV.
    model, hw = jp.load_model("llama-3.1-8b"), jp.load_hardware("h100-sxm")
    wl = workload_from_dict({"batch": 1, "prompt": 1000, "output": 1000})
    cap = jax.jit(S.capacity, static_argnames="opts")
    _, kv_plain, pool = cap(model, hw, jp.Parallel(), wl, S.serving(), OPTS)
    b, kv_paged, _ = cap(model, hw, jp.Parallel(), wl, S.serving(kv_block=32.0), OPTS)
    np.testing.assert_allclose(kv_paged / kv_plain, 2016 / 2000, rtol=1e-6)
    assert float(b) == np.floor(float(pool) / float(kv_paged))
