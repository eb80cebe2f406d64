"""experiments/kernel_check.py predicts DeepGEMM's FP8 GEMMs with the model's
own row costs: two shapes worked by hand (issue 37's kernel checks).

Compute-bound M=4096, N=2112, K=7168 on h100-sxm (132 SMs, 128x128x64 tiles):
  row tiles ceil(4096/128) = 32, column tiles ceil(2112/128) = 17 (16.5: the
  last tile is half empty), k-steps 7168/64 = 112 -> 32*17*112 = 60,928 k-loop
  iterations in ceil(60,928/132) = 462 waves, so the useful share is
  4096*2112*7168 / (462*132*128*128*64) = 62,008,590,336 / 63,946,850,304,
  and each tile's fixed time outside its k-loop (tile_latency, 0.7 us) adds
  tile_latency * fp8 peak / (2*128*128*64*132) k-steps to its 112.
  TFLOP/s = 2MNK / (2MNK / (fp8 peak * eff_compute * eff_narrow * share)
            + kernel_latency).
Memory-bound M=64, N=7168, K=16384: FP8 A and B plus the BF16 output,
  64*16384 + 16384*7168 + 2*64*7168 = 119,406,592 bytes at 3.35 TB/s *
  eff_memory, plus kernel_latency.
Both fail if the tile share, the FP8 derate or the BF16 output were dropped.
"""

import statistics
from pathlib import Path

import pytest
from helpers import import_script

from jaxplat import load_hardware, replace

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.fixture(scope="module")
def kc():
    return import_script(EXPERIMENTS, "kernel_check")


def test_large_fp8_gemm_tile_share_by_hand(kc):
    hw = load_hardware("h100-sxm")
    m, n, k = 4096, 2112, 7168
    share = 62_008_590_336 / 63_946_850_304
    # each of the 32 x 17 output tiles (128 x 128) runs 112 k-steps of 64 and the tile time outside them:
    # tile_latency at the FP8 peak's rate per SM is that many k-steps more (efficiency.quantization)
    extra = float(hw.tile_latency) * 1978.9e12 / (2.0 * 128 * 128 * 64 * 132)
    share /= 1.0 + extra / 112.0
    rate = 1978.9e12 * float(hw.eff_compute) * float(hw.eff_narrow) * share
    flops = 2.0 * m * n * k
    want = flops / (flops / rate + float(hw.kernel_latency)) / 1e12
    tflops, gbs = kc.gemm_prediction(hw, m, n, k)
    assert tflops == pytest.approx(want, rel=2e-4)
    assert float(hw.kernel_latency) == pytest.approx(2e-6)  # the graph-captured stack (specs/software)
    assert float(hw.tile_latency) == pytest.approx(0.7e-6)  # the shipped calibration (kernel_pins.py)
    assert gbs == pytest.approx((m * k + k * n + 2 * m * n) / (flops / (tflops * 1e12)) / 1e9, rel=1e-5)


def test_skinny_fp8_gemm_is_memory_bound_by_hand(kc):
    hw = load_hardware("h100-sxm")
    nbytes = 64 * 16384 + 16384 * 7168 + 2 * 64 * 7168
    assert nbytes == 119_406_592
    t = nbytes / (3.35e12 * float(hw.eff_memory)) + float(hw.kernel_latency)
    _, gbs = kc.gemm_prediction(hw, 64, 7168, 16384)
    assert gbs == pytest.approx(nbytes / t / 1e9, rel=2e-4)


def test_shipped_memory_is_the_one_the_kernel_rows_imply(kc):
    """The shipped calibration pins `memory` at the HBM fraction at which
    DeepGEMM's M=64 fit rows come out right in the median (its header): 0.825.
    If the model's kernel cost or those rows change, the pin is stale and this
    fails (checked: with the fit's 0.914 back in the file, it fails)."""
    hw = load_hardware("h100-sxm")
    assert float(hw.eff_memory) == pytest.approx(kc.implied_memory(hw), abs=2e-3)


def test_shipped_compute_and_tile_time_are_the_best_on_the_kernel_rows():
    """The shipped calibration pins `compute` and `tile_latency` together where
    DeepGEMM's compute-bound fit rows (M=4096 dense, contiguous grouped) come
    out best in median |error| (experiments/kernel_pins.py, a grid of 0.01 x
    0.1 us): the shipped pair must score no worse than each of its eight grid
    neighbours, and well below the fit's (0.669, no tile time: 8.0% against
    1.3%). Fails if either pin goes stale or the tile term is dropped."""
    kp = import_script(EXPERIMENTS, "kernel_pins")
    hw = load_hardware("h100-sxm")
    shapes = kp.deepgemm_rows("fit", lambda m, grouped, notes: m >= 4096)
    assert len(shapes) == 10

    def score(c, t):
        h = replace(hw, efficiency=replace(hw.efficiency, compute=c, tile_latency=t))
        return statistics.median(abs(e) for e in kp.gemm_errors(h, shapes))

    c0, t0 = float(hw.eff_compute), float(hw.tile_latency)
    assert (c0, t0) == pytest.approx((0.75, 0.7e-6))
    best = score(c0, t0)
    assert best < 0.02
    for dc in (-0.01, 0.0, 0.01):
        for dt in (-0.1e-6, 0.0, 0.1e-6):
            assert best <= score(c0 + dc, t0 + dt) + 1e-9, (dc, dt)
    assert score(0.668849, 0.0) > 0.07


def test_attention_forward_by_hand(kc):
    """FlashAttention-3's BF16 forward, head dim 128, S = 16,384, 16 heads, batch 1, on h100-sxm. Compute: the two
    matmuls' 2 x 16 x 128 x S^2 FLOPs each and the softmax row's 5 x 16 x S^2 at 989.4 TFLOP/s x compute x
    attention_compute, one exponential per score at 67e12 / 16 per second on the score row. Memory: Q and K read by
    the score row, V read and the output written by the weighted sum (16 x S x 128 x 2 bytes each) at 3.35 TB/s x
    memory x attention. Each row is the 2-norm of the two (attention_overlap 2), one kernel launch beside them.
    Fails if the exponentials hid behind the matmuls or ran at the tensor cores' rate, or the rows took the max."""
    import math
    hw = load_hardware("h100-sxm")
    s, heads, hd = 16384, 16, 128
    mm, scores, qkvo = 2.0 * heads * hd * s * s, heads * s * s, heads * s * hd * 2.0
    rate = 989.4e12 * float(hw.eff_compute) * float(hw.efficiency.attention_compute)
    bw = 3.35e12 * float(hw.efficiency.memory) * float(hw.efficiency.attention)
    c_scores, c_softmax, c_attend = mm / rate + scores / (67e12 / 16), 5.0 * scores / rate, mm / rate
    t = math.hypot(c_scores, 2 * qkvo / bw) + c_softmax + math.hypot(c_attend, 2 * qkvo / bw) + float(hw.kernel_latency)
    assert kc.attention_prediction(hw, 1, s, hd, heads, causal=False) == pytest.approx(2 * mm / t / 1e12, rel=1e-5)


def test_shipped_attention_compute_is_the_one_the_fa3_rows_imply(kc):
    """The shipped `attention_compute` is where FlashAttention-3's BF16 fit rows at S=16k come out right in the
    median, beside the exponentials (specs/calibration/default.yaml header; kernel_check's implied line)."""
    hw = load_hardware("h100-sxm")
    assert float(hw.efficiency.attention_compute) == pytest.approx(kc.implied_attention_compute(hw), abs=2e-3)


def test_fa2_speed_is_the_one_its_rows_imply(kc):
    """attention_kernels.FA2_ON_HOPPER is where FlashAttention-2's BF16 fit rows on the H100 at S=16k come out right in
    the median, its matmuls at that share of FA3's (the FA3 paper's own FA2 rows)."""
    from jaxplat.cost.attention_kernels import FA2_ON_HOPPER
    assert FA2_ON_HOPPER == pytest.approx(kc.implied_fa2_speed(load_hardware("h100-sxm")), abs=2e-3)


def test_attention_holds_every_head_dimension(kc):
    """At S = 16k (non-causal) FlashAttention-3 runs 497, 648 and 756 TFLOP/s at head dims 64, 128 and 256:
    the softmax's fixed time per score weighs less as the head grows. The model holds all three within 3%
    (one attention share put head dim 64 at +27% and 256 at -15%)."""
    items = [x for x in kc.flash_attention(kc.kernel_rows())
             if x[0] in ("fit", "validation") and "S=16384" in x[1] and "full" in x[1] and "bf16" in x[1]]
    assert len(items) == 3
    for _, what, pred, meas in items:
        assert pred / meas == pytest.approx(1.0, abs=0.03), what


def test_attention_variants_reproduce_the_model_before_and_after(kc):
    """experiments/attention_variants.py adds its candidate costs to rows without a query count (the model's own
    diagonal tiles and overlap off). With none switched on it is the model with overlap 0 and one-row tiles (the
    model before them); with the diagonal and the 2-norm it is the shipped model, two implementations of one cost
    (its FLOPs T (T + 128) / 2 per head against the model's extra FLOPs on the rows, its norm against
    efficiency.attention_overlap), causal and not."""
    import jax.numpy as jnp
    av = import_script(EXPERIMENTS, "attention_variants")
    hw = load_hardware("h100-sxm")
    assert float(hw.efficiency.attention_overlap) == 2.0 and float(hw.chip.tile_m) == 128.0
    before = replace(hw, eff_attention_overlap=0.0, chip=replace(hw.chip, tile_m=jnp.float32(1.0)))
    none = av.prediction(av.VARIANTS[0])
    shipped = av.prediction(next(v for v in av.VARIANTS if "shipped" in v[0]))
    for causal in (False, True):
        for s, b in ((512, 32), (4096, 4)):
            assert none(hw, b, s, 128, 16, causal) == pytest.approx(
                kc.attention_prediction(before, b, s, 128, 16, causal), rel=1e-5)
            assert shipped(hw, b, s, 128, 16, causal) == pytest.approx(
                kc.attention_prediction(hw, b, s, 128, 16, causal), rel=1e-5)
    # The 2-norm at S = 512, non-causal, where compute and memory are within 10% of each other: between
    # 1/sqrt(2) and 1 of the max's rate, near the bottom.
    ratio = kc.attention_prediction(hw, 32, 512, 128, 16, False) / kc.attention_prediction(before, 32, 512, 128, 16,
                                                                                         False)
    assert 2 ** -0.5 <= ratio < 0.85
