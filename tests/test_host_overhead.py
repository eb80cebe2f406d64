"""The host's per-sequence work in an engine iteration (efficiency.host_time),
overlapped with the GPU step: worked by hand."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxplat as jp
from jaxplat import serving as S
from jaxplat.cost.efficiency import REFERENCE_HOST_CLOCK_HZ
from jaxplat.model import hardware_from_dict, replace, workload_from_dict
from jaxplat.specs import SpecError

OPTS = jp.Options()
WL = workload_from_dict({"batch": 1, "prompt": 128, "output": 128})
NONE = jnp.zeros((1,), jnp.float32)


@pytest.fixture(scope="module")
def llama8b():
    return jp.load_model("llama-3.1-8b")


def _step(model, hw, n, par=jp.Parallel(), chunk=NONE, ctx0=NONE):
    """Seconds of one iteration: n decodes at context 200, optional prompt chunk."""
    return float(S.iteration_time_jit(model, hw, par, WL, OPTS, jnp.float32(n), jnp.float32(200.0), chunk, ctx0))


def test_host_paces_the_iteration_when_longer(llama8b):
    """4096 decodes of Llama-3.1-8B on one H100: the GPU step is the
    kernels' time (bf16, ~34 us a sequence); 50 us of host work per sequence
    (205 ms) is longer and paces the iteration, 1 us (4 ms) hides under it; the overlap is a max,
    not a sum."""
    h100 = replace(jp.load_hardware("h100-sxm"), sequence_overhead=0.0)
    gpu = _step(llama8b, h100, 4096)
    assert 4.1e-3 < gpu < 0.2  # between the two host times below
    assert _step(llama8b, replace(h100, sequence_overhead=50e-6), 4096) == pytest.approx(50e-6 * 4096, rel=1e-6)
    assert _step(llama8b, replace(h100, sequence_overhead=1e-6), 4096) == pytest.approx(gpu, rel=1e-6)
    # a prompt in the iteration is one more sequence for the host
    one = jnp.array([128.0])
    assert _step(llama8b, replace(h100, sequence_overhead=50e-6), 4096, chunk=one, ctx0=NONE) == pytest.approx(
        50e-6 * 4097, rel=1e-6)


def test_host_time_scales_with_the_host_clock(llama8b):
    """The same work on a 3.1 GHz Grace host (GB200) takes 3.8 / 3.1 of the
    reference 3.8 GHz Xeon's; a chip spec without `host_cpu` is on the
    reference host."""
    s, n = 50e-6, 4096
    gb200 = replace(jp.load_hardware("gb200"), sequence_overhead=s)
    assert float(gb200.host_clock_hz) == 3.1e9 and REFERENCE_HOST_CLOCK_HZ == 3.8e9
    assert _step(llama8b, gb200, n) == pytest.approx(s * n * 3.8 / 3.1, rel=1e-6)
    mi300x = replace(jp.load_hardware("mi300x"), sequence_overhead=s)
    assert float(mi300x.host_clock_hz) == 0.0
    assert _step(llama8b, mi300x, n) == pytest.approx(s * n, rel=1e-6)


def test_attention_data_parallel_ranks_split_the_host_work():
    """Qwen3-30B-A3B over 4 attention-data-parallel ranks (Parallel.ep):
    each rank's scheduler holds a quarter of the 4096 sequences."""
    model = jp.load_model("qwen3-30b-a3b")
    hw = replace(jp.load_hardware("h100-sxm"), sequence_overhead=200e-6)
    par = jp.Parallel(ep=4)
    assert _step(model, hw, 4096, par) == pytest.approx(200e-6 * 1024, rel=1e-6)


def test_host_bound_engine_serves_one_token_per_sequence_overhead(llama8b):
    """Offline max load with 10 ms of host work per sequence (more than the
    GPU time of a sequence's 128-token prompt, ~3 ms on H100): every
    iteration gives each of its sequences one token (whole prompts their
    first, decodes their next) in 10 ms each, so the engine serves 100
    output tokens/s whatever the batch; on GB200's 3.1 GHz host 3.1 / 3.8 of
    that. 1%: the closed loop's mean field (serving.concurrency) counts the
    decodes beside a prefill as an average."""
    srv = S.serving(max_batch=256.0)
    for name, want in (("h100-sxm", 100.0), ("gb200", 100.0 * 3.1 / 3.8)):
        hw = replace(jp.load_hardware(name), sequence_overhead=1e-2)
        _, thr = jax.device_get(S.max_load_jit(llama8b, hw, jp.Parallel(), WL, srv, OPTS))
        assert float(thr) == pytest.approx(want, rel=1e-2)


def test_host_time_gradient_is_the_sequences(llama8b):
    """d(iteration time) / d(sequence_overhead) = sequences x 3.8 / clock
    where the host paces the iteration, 0 where the GPU does."""
    gb200 = jp.load_hardware("gb200")

    def t(s, n):
        return S.iteration_time(llama8b, replace(gb200, sequence_overhead=s), jp.Parallel(), WL, OPTS,
                                jnp.float32(n), jnp.float32(200.0), NONE, NONE)
    g = jax.grad(t)(jnp.float32(50e-6), 4096.0)
    np.testing.assert_allclose(float(g), 4096 * 3.8 / 3.1, rtol=1e-5)
    assert float(jax.grad(t)(jnp.float32(1e-7), 4096.0)) == 0.0


def test_host_cpu_spec_block():
    base = {"name": "x", "flops": {"bf16": 1e15}, "memory": [{"name": "hbm", "size": 8e10, "bandwidth": 3e12}],
            "network": [{"domain": 8, "bandwidth": 4.5e11, "latency": 1e-6}], "tdp_w": 700}
    hw = hardware_from_dict({**base, "host_cpu": {"name": "Grace", "clock_hz": 3.1e9}}, src="x.yaml")
    assert float(hw.host_clock_hz) == 3.1e9
    with pytest.raises(SpecError, match=r"^x.yaml: .*host_cpu.clock_hz.*") as e:
        hardware_from_dict({**base, "host_cpu": {"clock_hz": -1}}, src="x.yaml")
    assert "\n" not in str(e.value)
    with pytest.raises(SpecError, match=r"x.yaml: unknown key host_cpu.'ghz'"):
        hardware_from_dict({**base, "host_cpu": {"ghz": 3.1}}, src="x.yaml")
