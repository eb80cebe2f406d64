"""Skinny dense GEMMs (decode, short prompts) pay a row tile sized to their
rows (efficiency.dense_tile_m: the shortest power of two from 8 up to the
chip's tile_m), not a whole tile_m, so a batch-1 decode step is as memory
bound as the chip's bandwidth makes it."""

import numpy as np
import pytest
from helpers import workload

import jaxplat as jp
from jaxplat.cost import quantization
from jaxplat.cost.efficiency import dense_tile_m
from jaxplat.model import replace

H100_STRUCTURE = dict(units=132.0, tile_m=128.0, tile_n=128.0, tile_k=64.0, tile_latency=0.0)


@pytest.mark.parametrize("m, tile, waves", [(1, 8, 63), (8, 8, 63), (100, 128, 63), (300, 128, 187)])
def test_row_tiles_by_hand(h100, m, tile, waves):
    """An m x 8192 x 8192 GEMM on H100's 132 SMs with 128 x 128 x 64 tiles:
    m = 1 and 8 take 8-row tiles, 100 a 128-row one, 300 three 128-row ones.
    Tiles x 64 columns x 128 k-steps over 132 SMs: 8192 iterations are 63
    waves, 24576 (m = 300) are 187; the useful share is m x 8192^2 over
    waves x 132 x tile x 128 x 64."""
    hw = replace(h100, **H100_STRUCTURE)
    assert float(dense_tile_m(float(m), hw)) == tile
    q = quantization(float(m), 8192.0, 8192.0, 1.0, hw, tile_m=dense_tile_m(float(m), hw))
    np.testing.assert_allclose(float(q), m * 8192**2 / (waves * 132 * tile * 128 * 64), rtol=1e-6)
    # a chip whose tile is shorter than 8 rows keeps its own
    assert float(dense_tile_m(1.0, replace(hw, tile_m=4.0))) == 4.0


def test_batch1_decode_is_memory_bound_on_a_fast_memory_chip(llama70b):
    """Llama-3.1-70B at batch 1 on 8 chips with H100's structure, 20 TB/s and
    300 TFLOP/s (BF16): every decode GEMM streams its weights far longer than
    its 1-row math takes, so doubling (and quadrupling) FLOP/s leaves TPOT
    as it is (to the fused softmax's few FLOPs). With whole 128-row tiles it
    fell 21% (24.8 -> 19.7 ms) when FLOP/s doubled. The tile's fixed time
    (efficiency.tile_latency, which does not shrink with FLOP/s and enters
    the smooth max on the compute side) is set to 0: this checks the tile's
    shape; test_kernel_check works the fixed time by hand."""
    h100 = jp.load_hardware("h100-sxm")
    hw = replace(h100, flops=h100.flops * (300e12 / float(h100.flops[2])), mem_bw=h100.mem_bw.at[0].set(20e12),
                 tile_latency=0.0)
    wl = workload(batch=1, prompt=1024, output=256)
    tpot = [float(jp.evaluate(llama70b, replace(hw, flops=hw.flops * k), jp.Parallel(tp=8), wl).tpot)
            for k in (1.0, 2.0, 4.0)]
    np.testing.assert_allclose(tpot, [tpot[0]] * 3, rtol=1e-4)
