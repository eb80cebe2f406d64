"""Serving: the request simulator vs the queueing approximation,
zero-load limits, goodput, speculative decoding."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxplat as jp
from jaxplat import serving as S
from jaxplat.model import replace, workload_from_dict
from jaxplat.serving import simulator as M
from jaxplat.serving.queue_model import prompt_chain

OPTS = jp.Options()
WL = workload_from_dict({"batch": 1, "prompt": 512, "output": 64, "slo": {"ttft": 0.2, "tpot": 0.02}})
MAX_BATCH = jnp.float32(64.0)
SEEDS = 4  # simulator runs averaged per loaded case


@functools.partial(jax.jit, static_argnames=())
def _sim(model, hw, rates, chunks, warmups, seeds):
    """One compiled simulator, vmapped over (rate, chunk, warm-up, seed)."""
    def one(rate, chunk, warmup, seed):
        srv = S.serving(rate=rate, chunk=chunk, max_batch=64.0)
        return M.simulate_sampled(model, hw, jp.Parallel(), WL, srv, jax.random.PRNGKey(seed), OPTS, warmup,
                                  n_requests=512, slots=64, iterations=4096)
    return jax.vmap(one)(rates, chunks, warmups, seeds)


def _queue(model, hw, rates, chunks):
    """The queueing model at each (rate, chunk), through the jitted entry point
    `jaxplat estimate --rate` uses (one compiled program for both)."""
    qs = [S.queueing_jit(model, hw, jp.Parallel(), WL, S.serving(rate=r, chunk=c), OPTS, MAX_BATCH)
          for r, c in zip(np.asarray(rates), np.asarray(chunks))]
    return jax.tree.map(lambda *x: np.stack(x), *jax.device_get(qs))


@pytest.fixture(scope="module")
def setup():
    # The chip's efficiencies are pinned to those the figures in the docstrings
    # were worked out with (flat 0.7 / 0.8, no fixed latencies): these tests
    # compare two models of one chip, not the shipped calibration, which a refit moves.
    model = jp.load_model("llama-3.1-8b")
    hw = replace(jp.load_hardware("h100-sxm"), eff_compute=0.7, eff_memory=0.8, eff_network=0.8, eff_narrow=1.0,
                 eff_attention=1.0, eff_moe=1.0, kernel_latency=0.0, iteration_overhead=0.0,
                 sequence_overhead=0.0)
    # zero load, moderate load (whole prompts), moderate load (chunked, 256-token budget)
    rates, chunks = jnp.array([1e-3, 30.0, 30.0]), jnp.array([0.0, 0.0, 256.0])
    # The loaded cases average SEEDS independent runs of 512 requests: one
    # run's mean TTFT spreads about 5% (1 s.d.) from seed to seed at
    # 30 req/s, the mean of 4 about 2.5%, well inside the 10% tolerance
    # (experiments/serving_queue_vs_sim.py --rates 30 --seeds 16
    # --requests 512 --iterations 4096; one run of 256 requests: 9%).
    case = np.repeat(np.arange(3), [1, SEEDS, SEEDS])  # the case of each simulator run
    seeds = np.concatenate([[0], np.arange(SEEDS), np.arange(SEEDS)])
    runs = jax.device_get(_sim(model, hw, rates[case], chunks[case], jnp.array([0.0, 0.2, 0.2])[case], seeds))
    sim = jax.tree.map(lambda x: np.array([x[case == i].mean() for i in range(3)]), runs[0])
    info = {"finished": np.array([runs[1]["finished"][case == i].min() for i in range(3)])}
    q = jax.device_get(_queue(model, hw, rates.at[0].set(0.0), chunks))  # the model at exactly zero load
    unloaded = jax.device_get(jp.evaluate(model, hw, jp.Parallel(), WL, OPTS))
    return model, hw, sim, info, q, unloaded


def test_zero_load_gives_unloaded_latencies(setup):
    _, _, sim, info, q, m = setup
    assert info["finished"][0] > 0.1  # the requests that finished within the horizon
    for got in (sim.ttft_mean[0], q.ttft_mean[0]):
        np.testing.assert_allclose(got, m.ttft, rtol=2e-3)
    # the queueing model takes the step at the mean context (exact when no
    # operator crosses its roofline ridge over the output)
    for got in (sim.tpot_mean[0], q.tpot_mean[0]):
        np.testing.assert_allclose(got, m.tpot, rtol=1e-2)


@pytest.mark.parametrize("i", [1, 2])
def test_simulator_and_queueing_agree_at_moderate_load(setup, i):
    _, _, sim, info, q, m = setup
    assert info["finished"][i] > 0.99 and bool(q.stable[i])
    assert 4.0 < float(q.batch[i]) < 48.0  # moderate: a real batch, well below capacity
    assert float(sim.tpot_mean[i]) > 1.1 * float(m.tpot)  # load visibly slows decoding
    for k in ("ttft_mean", "tpot_mean", "e2e_mean"):
        np.testing.assert_allclose(getattr(q, k)[i], getattr(sim, k)[i], rtol=0.10, err_msg=k)


@pytest.mark.parametrize("i", [1, 2])
def test_latency_percentiles_spread_like_the_simulator(setup, i):
    """TTFT percentiles are not the mean (issue 16: p50 equalled p99 with fixed
    lengths): the wait for the engine spreads them. Against the simulator's
    nearest-rank percentiles (mean of 4 runs) at 30 req/s: TTFT p50 18.2 /
    25.7 ms, p99 55.5 / 67.0 ms (whole prompts / chunked), the model
    18.8 / 26.1 and 52.2 / 59.1 ms (the exponential wait of queueing.py)."""
    _, _, sim, _, q, _ = setup
    assert float(q.ttft_p99[i]) > 1.8 * float(q.ttft_p50[i])
    assert float(q.ttft_p50[i]) < float(q.ttft_mean[i]) < float(q.ttft_p90[i])
    for k in ("ttft_p50", "ttft_p90", "ttft_p99", "e2e_p50", "e2e_p99", "tpot_p50", "tpot_p90"):
        np.testing.assert_allclose(getattr(q, k)[i], getattr(sim, k)[i], rtol=0.15, err_msg=k)


def _md_inf_seen(lam, life=1.0, horizon=3000.0):
    """Monte Carlo of an M/D/inf system (Poisson arrivals, rate lam, each
    staying `life`): the others' count a request sees averaged over its own
    life (the others overlap its [t, t + D] by D - |s - t| each)."""
    rng = np.random.default_rng(0)
    s = np.cumsum(rng.exponential(1.0 / lam, int(lam * horizon * 1.1)))
    s = s[s < horizon]
    tags = s[(s > life) & (s < horizon - life)][::5]
    lo, hi = np.searchsorted(s, tags - life), np.searchsorted(s, tags + life)
    return np.array([np.maximum(life - np.abs(s[a:b] - t), 0.0).sum() - life
                     for t, a, b in zip(tags, lo, hi)]) / life


@pytest.fixture(scope="module")
def disagg(setup):
    """(serving settings, result) of the disaggregated pools (one chip each) at 30 req/s: one compiled
    program for the tests below."""
    model, hw, *_ = setup
    srv = S.serving(rate=30.0)
    return srv, jax.device_get(jax.jit(lambda m, h: S.disaggregated(
        m, h, jp.Parallel(), jp.Parallel(), WL, srv, jnp.float32(1), jnp.float32(1), OPTS))(model, hw))


def test_disaggregated_tpot_spread_is_the_md_inf_spread(setup, disagg):
    """The decode pool's TPOT percentiles are decode iterations at 1 + b +
    z sigma sequences, sigma the spread of the others' count averaged over a
    request's life. From the model's own p90 / p99 TPOT, invert the
    iteration time (linear in the sequences here: memory-bound) for those
    counts, and compare sigma with a Monte Carlo of the M/D/inf system at
    the model's b (the old test ran the Monte Carlo against 2 b / 3 typed
    in, no project code; a Poisson spread sqrt(b) is 22% wider and fails)."""
    model, hw, *_ = setup
    srv, d = disagg
    b = float(d.batch)
    ctx = 512 + 64 * (1 + float(srv.output_cv) ** 2) / 2
    step = jax.jit(lambda n: S.decode_time(model, hw, jp.Parallel(), WL, OPTS, n, jnp.float32(ctx)))
    t10, t15, t20 = (float(step(jnp.float32(n))) for n in (10.0, 15.0, 20.0))
    assert t15 == pytest.approx((t10 + t20) / 2, rel=1e-4)  # linear in n here
    seen = _md_inf_seen(b)
    assert seen.mean() == pytest.approx(b, rel=0.02)
    for tq, z in ((float(d.tpot_p90), 1.2815516), (float(d.tpot_p99), 2.3263479)):
        n = 10.0 + (tq - t10) / (t20 - t10) * 10.0
        assert (n - 1.0 - b) / z == pytest.approx(seen.std(), rel=0.06)


def test_disaggregated_tpot_percentiles_spread(disagg):
    """The decode pool's TPOT percentiles (they all equalled the mean): at
    30 req/s about 11 decodes share each iteration, and a request's own mean
    batch spreads as sqrt(2 b / 3) (test above), so p99 > p90 > p50 = the
    fixed-point mean, within the step time of a few more sequences."""
    _, d = disagg
    assert float(d.tpot_p50) == pytest.approx(float(d.tpot_mean), rel=1e-6)
    assert float(d.tpot_mean) < float(d.tpot_p90) < float(d.tpot_p99) < 1.1 * float(d.tpot_mean)
    assert float(d.ttft_p50) < float(d.ttft_p99) and float(d.e2e_p50) < float(d.e2e_p99)


def test_prompt_chain_linear_case_closed_form():
    # With e1 = e2 = e the whole-prompt chain's moments have closed forms:
    # E[T] = t0 / (1 - lam e), E[T^2] (1 - lam^2 e^2) = t0^2 + 2 t0 e lam E[T] + e^2 lam E[T].
    t0, e, lam = 6e-3, 1.2e-2, 40.0
    mean, sq, tail = prompt_chain(jnp.float32(lam), t0, e, e)
    want = t0 / (1.0 - lam * e)
    want_sq = (t0 ** 2 + 2 * t0 * e * lam * want + e ** 2 * lam * want) / (1.0 - (lam * e) ** 2)
    np.testing.assert_allclose([mean, sq], [want, want_sq], rtol=1e-4)
    assert float(tail) < 1e-6
    # smooth in the rate (it runs under jax.grad): d E[T] / d lam = t0 e / (1 - lam e)^2
    g = jax.grad(lambda r: prompt_chain(r, t0, e, e)[0])(jnp.float32(lam))
    np.testing.assert_allclose(g, t0 * e / (1.0 - lam * e) ** 2, rtol=1e-3)
    # a cheaper first prompt shortens iterations, a costlier second lengthens them
    assert float(prompt_chain(jnp.float32(lam), t0, e / 2, e)[0]) < float(mean)
    assert float(prompt_chain(jnp.float32(lam), t0, e / 2, 2 * e)[0]) > float(prompt_chain(
        jnp.float32(lam), t0, e / 2, e)[0])


def test_pipelined_iteration_is_evaluates_decode_step():
    # pp = 2 with 4 micro-batches in flight: one decode-only iteration of 16
    # sequences at context P + 1 is evaluate's one decode step (output 2),
    # max(one micro-batch's pass, 4 x its busiest stage); with one micro-batch
    # it is a whole pass of all 16.
    model, hw = jp.load_model("llama-3.1-8b"), jp.load_hardware("h100-sxm")
    wl = workload_from_dict({"batch": 16, "prompt": 512, "output": 2})
    z = jnp.zeros((1,), jnp.float32)
    for nmb in (4.0, 1.0):
        par = jp.Parallel(pp=2, microbatches=nmb)
        want = float(jp.evaluate(model, hw, par, wl, OPTS).tpot)
        got = float(S.iteration_time_jit(model, hw, par, wl, OPTS, jnp.float32(16.0), jnp.float32(513.0), z, z))
        np.testing.assert_allclose(got, want, rtol=2e-3)


def test_goodput_monotone_in_hardware_speed(setup):
    model, hw = setup[0], setup[1]
    g = [float(S.goodput_jit(model, replace(hw, flops=hw.flops * x, mem_bw=hw.mem_bw * x, sram_bw=hw.sram_bw * x),
                             jp.Parallel(), WL, S.serving(), OPTS, MAX_BATCH)) for x in (0.5, 1.0, 2.0)]
    assert g[0] > 0 and np.all(np.diff(g) > 0), g


def test_speculative_expected_tokens():
    np.testing.assert_allclose(S.expected_tokens(0.0, 0.7), 1.0, rtol=1e-6)
    np.testing.assert_allclose(S.expected_tokens(4.0, 0.5), 1 + 0.5 + 0.25 + 0.125 + 0.0625, rtol=1e-6)
    np.testing.assert_allclose(S.expected_tokens(3.0, 1.0), 4.0, rtol=1e-4)


def test_power_limit_slows_an_iteration_as_it_slows_evaluate():
    # With 1000x the default J per FLOP an H100 would draw far above its
    # 700 W running a 2,048-token prefill: evaluate's TTFT is power-limited
    # (energy.clock_share), and the serving model's prefill iteration of the
    # same prompt at batch 1 is evaluate's TTFT, throttled by the same law.
    model = jp.load_model("llama-3.1-8b")
    cool = jp.load_hardware("h100-sxm")
    hot = replace(cool, energy_flop=cool.power.energy_flop * 1e3)
    wl = workload_from_dict({"batch": 1, "prompt": 2048, "output": 2})
    m, m_cool = jp.evaluate(model, hot, jp.Parallel(), wl, OPTS), jp.evaluate(model, cool, jp.Parallel(), wl, OPTS)
    assert float(m.throttle) > 2.0 and float(m_cool.throttle) == 1.0
    z, chunk = jnp.zeros((1,), jnp.float32), jnp.full((1,), 2048.0, jnp.float32)
    got = float(S.iteration_time_jit(model, hot, jp.Parallel(), wl, OPTS, jnp.float32(0.0), jnp.float32(0.0), chunk, z))
    np.testing.assert_allclose(got, float(m.ttft), rtol=2e-3)
    assert float(m.ttft) > 2.0 * float(m_cool.ttft)
