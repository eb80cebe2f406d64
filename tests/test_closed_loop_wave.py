"""Closed loop under a prefill-first scheduler (vLLM V0 without chunked
prefill, SGLang without mixed chunks): the N clients of a benchmark start
together and stay one wave, so a prompt waits for the prompts ahead of it.
Checked against the request simulator run closed loop with the same
scheduler (the oracle), and by hand."""

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
N = 16.0
# (chunk, max_num_tokens, prefill_first): whole prompts, 4 per 2048-token
# iteration (a wave of 16 = 4 prefill iterations); chunked, 2 prompts per
# 1024-token iteration (8); whole prompts mixed with decodes (the old rule).
CASES = np.array([[0, 2048, 1], [1024, 8192, 1], [0, 2048, 0]], np.float32)


@jax.jit
def _both(model, hw, cases):
    def one(c):
        srv = S.serving(chunk=c[0], max_num_tokens=c[1], prefill_first=c[2], max_batch=64.0)
        cl = S.closed_loop(model, hw, jp.Parallel(), WL, srv, N, OPTS)
        sim_srv = S.serving(chunk=c[0], max_num_tokens=c[1], prefill_first=c[2], max_batch=N)
        reqs = M.sample_requests(jax.random.PRNGKey(0), WL, sim_srv, 256)
        sim, _ = M.simulate(model, hw, jp.Parallel(), WL, sim_srv, reqs, OPTS, 0.25, slots=16, iterations=2048,
                            closed=True)
        return cl, sim
    # One prefill-only iteration of 4 whole prompts, and a decode step of 16.
    one_it = jnp.ones((1,), jnp.float32)
    t_p = S.iteration_time(model, hw, jp.Parallel(), WL, OPTS, 0.0, 512.0, 512.0 * one_it, 0.0 * one_it,
                           4.0 * one_it)
    return jax.vmap(one)(cases), t_p


@pytest.fixture(scope="module")
def runs():
    model, hw = jp.load_model("llama-3.1-8b"), jp.load_hardware("h100-sxm")
    return jax.device_get(_both(model, hw, jnp.asarray(CASES)))


def test_wave_matches_simulator(runs):
    (cl, sim), _ = runs
    sim_thr = N * 64 / sim.e2e_mean  # a client's cycle is its request's E2E (no think time)
    np.testing.assert_allclose(cl.throughput[:2], sim_thr[:2], rtol=0.02)
    np.testing.assert_allclose(cl.tpot[:2], sim.tpot_mean[:2], rtol=0.02)
    np.testing.assert_allclose(cl.ttft[0], sim.ttft_mean[0], rtol=0.02)
    # chunked: the mean of ceil(j P / C) taken as (N + 1) P / (2 C) + 1/2 = 4.75
    # for the exact mean of ceil(j / 2), j = 1..16: 4.5 (5.6% high)
    np.testing.assert_allclose(cl.ttft[1], sim.ttft_mean[1], rtol=0.08)


def test_wave_ttft_by_hand(runs):
    (cl, sim), t_p = runs
    # 16 prompts, 4 per prefill-only iteration: prompts 1-4 get their first
    # token after one iteration, 5-8 after two... mean (1 + 2 + 3 + 4) / 4 =
    # 2.5 iterations of t_p, in the simulator and the model.
    np.testing.assert_allclose(sim.ttft_mean[0], 2.5 * t_p, rtol=0.02)
    np.testing.assert_allclose(cl.ttft[0], 2.5 * t_p, rtol=1e-3)
    # Without prefill-first the clients spread out and a prompt waits about one
    # iteration, well under the wave's 2.5: the wave is what raises TTFT.
    assert cl.ttft[2] < 0.6 * cl.ttft[0]
    assert sim.ttft_mean[2] < 0.6 * sim.ttft_mean[0]


def test_attention_data_parallel_ranks_schedule_their_own_budgets():
    """Mixtral-8x7B on 8 H100s as tp 1 x ep 8, prefill-first, whole prompts,
    a 512-token budget per rank (TensorRT-LLM attention DP and SGLang DP
    attention schedule each rank's own iteration): 8 clients with 512-token
    prompts prefill in one iteration, one prompt per rank, so the wave's
    mean TTFT is that iteration's time. One 512-token budget for the whole
    replica would run them one by one: 8 iterations, mean (8 + 1) / 2 of
    one prompt's. (With the 2026-12-04 calibration, `moe` 0.05, the 8-prompt
    iteration costs 2.3 one-prompt ones, so the margin to that schedule's 4.5
    is 1.95x: asserted at 0.6, was 0.5.)"""
    model, hw, par = jp.load_model("mixtral-8x7b"), jp.load_hardware("h100-sxm"), jp.Parallel(ep=8)
    srv = S.serving(max_num_tokens=512.0, prefill_first=1.0, max_batch=64.0)
    assert float(S.replica_budget(srv, par)) == 8 * 512
    cl = jax.jit(lambda m, h: S.closed_loop(m, h, par, WL, srv, 8.0, OPTS))(model, hw)
    one = jnp.ones((1,), jnp.float32)
    it = jax.jit(lambda m, h, n: S.iteration_time(m, h, par, WL, OPTS, 0.0, 512.0, 512.0 * one, 0.0 * one, n * one))
    t8, t1 = float(it(model, hw, 8.0)), float(it(model, hw, 1.0))
    assert float(cl.ttft) == pytest.approx(t8, rel=1e-3)
    assert float(cl.ttft) < 0.6 * 4.5 * t1
