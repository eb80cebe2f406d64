"""Attention data parallel (Parallel.ep) with fewer sequences than ranks:
ranks that hold no sequence route nothing to the experts. The experts see
the micro-batch's own tokens, not ep x the busiest rank's (issue 36)."""

import jax.numpy as jnp
import numpy as np
import pytest
from helpers import workload

import jaxplat as jp
from jaxplat.cost import build_table
from jaxplat.serving.iteration import iteration_table

# DeepSeek-V3: hidden 7168, 8 of 256 routed experts per token, each a gated
# FFN of width 2048: 2 x 7168 x 2 x 2048 (up + gate) + 2 x 2048 x 7168
# (down) = 6 x 7168 x 2048 FLOPs per token copy, 3 x 7168 x 2048 FP8
# weight bytes per expert.
COPY_FLOPS = 6 * 7168 * 2048
EXPERT_BYTES = 3 * 7168 * 2048


def _experts(t):
    rows = [t.names.index("experts_up_gate"), t.names.index("experts_down")]
    return float(np.sum(np.asarray(t.f0)[rows])), float(np.sum(np.asarray(t.w0)[rows]))


@pytest.fixture(scope="module")
def dsv3():
    return jp.load_model("deepseek-v3")


def test_batch1_decode_routes_one_token(dsv3):
    """Batch 1 on ep 8: the one token's 8 copies are spread over the 8 ranks,
    one copy and (in expectation, 256 (1 - (1 - 8/256)^1) / 8) one expert per
    rank: the 8 ranks together do one token's top-8 experts. (Every rank used
    to route a token of its own: 8 copies and 7.2 experts per rank.)"""
    wl = workload(batch=1, prompt=512, output=8, dtype="fp8")
    f, w = _experts(build_table(dsv3, jp.Parallel(ep=8), wl, "decode", jp.Options()))
    assert f == pytest.approx(COPY_FLOPS, rel=1e-6)  # x 8 ranks = 8 copies: one token's top-8 experts
    assert w == pytest.approx(EXPERT_BYTES, rel=1e-5)


def test_batch1_prefill_routes_its_prompt_once(dsv3):
    # 512 prompt tokens x 8 copies over 8 ranks: 512 copies per rank (not 8 x 512).
    wl = workload(batch=1, prompt=512, output=8, dtype="fp8")
    f, _ = _experts(build_table(dsv3, jp.Parallel(ep=8), wl, "prefill", jp.Options()))
    assert f == pytest.approx(512 * COPY_FLOPS, rel=1e-6)
    # the serving engine's iteration of that one prompt prices the same experts
    z = jnp.zeros((1,), jnp.float32)
    it = iteration_table(dsv3, jp.Parallel(ep=8), wl, jp.Options(), 0.0, 0.0, z + 512.0, z)
    assert _experts(it)[0] == pytest.approx(512 * COPY_FLOPS, rel=1e-6)


def test_fewer_sequences_cost_less(dsv3):
    # With ep = 8, batch 1 and batch 8 both put one sequence on the busiest rank, but batch 1
    # gives its experts 1/8 of the tokens: a faster step and less energy (they were equal).
    h200 = jp.load_hardware("h200-sxm")
    m = [jp.evaluate(dsv3, h200, jp.Parallel(ep=8), workload(batch=b, prompt=1024, output=64, dtype="fp8"))
         for b in (1, 8)]
    assert float(m[0].tpot) < float(m[1].tpot) and float(m[0].ttft) < float(m[1].ttft)
    # batch 8 (one sequence per rank): each rank's experts get 8 copies, as before the fix
    wl = workload(batch=8, prompt=512, output=8, dtype="fp8")
    f, _ = _experts(build_table(dsv3, jp.Parallel(ep=8), wl, "decode", jp.Options()))
    assert f == pytest.approx(8 * COPY_FLOPS, rel=1e-6)
