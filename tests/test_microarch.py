"""Systolic-array and tensor-core cycle counts (jaxplat.cost.microarch).

References: SCALE-Sim 3.0.0's "Total Cycles" (tests/data/scalesim/, written by
experiments/microarch/scalesim_reference.py), hand counts, and finite
differences of the smooth functions.
"""

import csv
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxplat.cost.microarch import DATAFLOWS, fold_count, gemm_cycles, tile_cycles, wave_count

CSV = Path(__file__).parent / "data" / "scalesim" / "gemm_cycles.csv"
DIMS = ("m", "n", "k", "rows", "cols")


def _scalesim(dataflow):
    """SCALE-Sim rows of one dataflow: (dims [n, 5] float, cycles [n] float)."""
    with open(CSV) as f:
        rows = [r for r in csv.DictReader(f) if r["dataflow"] == dataflow]
    dims = np.array([[float(r[d]) for d in DIMS] for r in rows])
    return dims, np.array([float(r["cycles"]) for r in rows])


def _batched(dims, dataflow, cores=1.0, smooth=False):
    f = jax.jit(jax.vmap(lambda m, n, k, a, b, c: gemm_cycles(m, n, k, a, b, dataflow, c, smooth)))
    c = np.broadcast_to(np.asarray(cores, dtype=float), dims.shape[:1])
    return np.asarray(f(*dims.T, c), dtype=np.float64)


def _spatial(dims, dataflow):
    """(S_R, S_C) per row: the GEMM dims laid on array rows and columns."""
    m, n, k = dims[:, 0], dims[:, 1], dims[:, 2]
    return {"ws": (k, n), "os": (m, n), "is": (k, m)}[dataflow]


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_exact_equals_scalesim(dataflow):
    dims, ref = _scalesim(dataflow)
    assert len(ref) >= 100  # the committed reference covers every array size
    np.testing.assert_array_equal(_batched(dims, dataflow), ref)


@pytest.mark.parametrize("dataflow", DATAFLOWS)
@pytest.mark.parametrize("cores", [2, 3, 4])
def test_cores_split_whole_folds(dataflow, cores):
    """`cores` arrays on a GEMM `cores` times wider (along S_C, in whole folds)
    take as long as SCALE-Sim's one array on one share."""
    dims, ref = _scalesim(dataflow)
    _, sc = _spatial(dims, dataflow)
    whole = sc % dims[:, 4] == 0
    wide = dims[whole].copy()
    wide[:, {"ws": 1, "os": 1, "is": 0}[dataflow]] *= cores
    assert whole.sum() >= 20
    np.testing.assert_array_equal(_batched(wide, dataflow, cores), ref[whole])


def test_hand_count_4x4():
    """M=5, N=9, K=7 on a 4x4 array, counted by hand (and run in SCALE-Sim 3.0.0:
    89, 77 and 75 cycles).

    ws: weights K x N sit on the array: ceil(7/4) = 2 row folds x ceil(9/4) = 3
    column folds = 6 folds. One fold: 4 cycles to shift the weights in, 3 for
    the first input to reach the bottom row, 5 input rows (M) one per cycle,
    3 more until the last column's last sum leaves: 4 + 3 + 5 + 3 = 15.
    6 x 15 = 90 cycles; SCALE-Sim prints the last cycle's index, 89.
    os: outputs M x N sit on the array: ceil(5/4) x ceil(9/4) = 6 folds, each
    K = 7 steps of streaming plus 3 + 3 of skew in and out: 13; 6 x 13 - 1 = 77.
    is: inputs K x M sit on the array: ceil(7/4) x ceil(5/4) = 4 folds, each
    4 + 3 + N = 9 + 3 = 19; 4 x 19 - 1 = 75.
    """
    got = [float(gemm_cycles(5, 9, 7, 4, 4, df)) for df in ("ws", "os", "is")]
    assert got == [89.0, 77.0, 75.0]


def test_waves_round_up():
    """4 folds on 3 cores: two waves, as long as 6 folds on 3 cores or 2 on 1."""
    one_fold = 2 * 4 + 4 + 5 - 2  # ws fold on 4x4 with M = 5 (see the hand count)
    # K = 8, N = 8: 2 x 2 = 4 folds
    assert float(gemm_cycles(5, 8, 8, 4, 4, "ws", cores=3)) == 2 * one_fold - 1
    assert float(gemm_cycles(5, 8, 8, 4, 4, "ws", cores=4)) == 1 * one_fold - 1
    assert float(gemm_cycles(5, 8, 8, 4, 4, "ws", cores=8)) == 1 * one_fold - 1


def test_tile_cycles_hand_count():
    """A 4096^3 GEMM, 128x128x64 tiles, 132 SMs at 1024 MACs/cycle: 32 x 32 =
    1024 tiles in ceil(1024 / 132) = 8 waves (the last 100/132 full), each tile
    64 k-steps of 128*128*64 / 1024 = 1024 cycles: 8 * 64 * 1024 = 524288."""
    assert float(tile_cycles(4096, 4096, 4096, 128, 128, 64, 132, 1024)) == 524288.0
    # 132 tiles fill one wave; 144 (12 x 12) need two: a 9% larger GEMM takes 2x
    one = float(tile_cycles(1536, 1408, 64, 128, 128, 64, 132, 1024))
    two = float(tile_cycles(1536, 1536, 64, 128, 128, 64, 132, 1024))
    assert (one, two) == (1024.0, 2048.0)
    # a partial tile (m = 129) costs a whole one, plus 50 cycles per wave
    assert float(tile_cycles(129, 128, 128, 128, 128, 64, 132, 1024, overhead=50.0)) == 2 * 1024.0 + 50.0


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_smooth_equals_exact_where_even(dataflow):
    """On SCALE-Sim rows whose dims divide the array evenly or fit in one fold,
    smooth mode gives SCALE-Sim's number; elsewhere never more than exact."""
    dims, ref = _scalesim(dataflow)
    sr, sc = _spatial(dims, dataflow)
    even = ((sr % dims[:, 3] == 0) | (sr <= dims[:, 3])) & ((sc % dims[:, 4] == 0) | (sc <= dims[:, 4]))
    assert 10 <= even.sum() < len(ref)
    smooth = _batched(dims, dataflow, smooth=True)
    np.testing.assert_array_equal(smooth[even], ref[even])
    assert np.all(smooth <= ref) and np.any(smooth[~even] < ref[~even])


def test_fold_count_smooth_pieces():
    """Exact at whole numbers and below 1; C1 at the joints x = 1 and x = 2."""
    x = jnp.array([0.25, 1.0, 2.0, 3.0, 7.0])
    np.testing.assert_array_equal(fold_count(x, smooth=True), [1.0, 1.0, 2.0, 3.0, 7.0])
    assert float(fold_count(1.5, smooth=True)) == 1.375  # 1 + 0.25 * 1.5
    slope = jax.vmap(jax.grad(lambda v: fold_count(v, smooth=True)))
    left, right = np.asarray(slope(jnp.array([1 - 1e-3, 2 - 1e-3]))), np.asarray(slope(jnp.array([1 + 1e-3, 2 + 1e-3])))
    np.testing.assert_allclose(left, [0.0, 1.0], atol=5e-3)  # slopes meet at both joints
    np.testing.assert_allclose(right, [0.0, 1.0], atol=5e-3)
    assert np.all(np.diff(fold_count(jnp.linspace(0.5, 2.5, 201), smooth=True)) >= 0)  # monotone
    assert float(wave_count(10.0, 4.0)) == 3.0


# Points that put each fold ratio below 1, inside the cubic (1, 2) and above 2.
GRAD_POINTS = [  # m, n, k, rows, cols, cores
    (64.0, 4096.0, 1000.0, 96.0, 200.0, 3.0),
    (2048.0, 300.0, 4096.0, 250.0, 130.0, 1.5),
    (1.0, 700.0, 128.0, 160.0, 48.0, 7.0),
    (230.0, 180.0, 300.0, 200.0, 128.0, 1.2),  # ratios 1.15 .. 1.8: the cubic
]


@pytest.mark.parametrize("dataflow", DATAFLOWS)
@pytest.mark.parametrize("point", GRAD_POINTS)
def test_smooth_gradient_matches_finite_differences(dataflow, point):
    """d cycles / d (rows, cols, cores) = central differences of the smooth function."""
    with jax.enable_x64(True):
        p = jnp.asarray(point, dtype=jnp.float64)

        def f(hw):
            return gemm_cycles(p[0], p[1], p[2], hw[0], hw[1], dataflow, hw[2], smooth=True)

        hw = p[3:]
        grad = np.asarray(jax.grad(f)(hw))
        h = 1e-4
        fd = np.array([(f(hw.at[i].add(h)) - f(hw.at[i].add(-h))) / (2 * h) for i in range(3)])
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6 * abs(float(f(hw))))
        assert np.any(grad != 0.0)


def test_tile_smooth_gradient_matches_finite_differences():
    with jax.enable_x64(True):
        def f(v):  # v = tile_m, tile_n, tile_k, units
            return tile_cycles(3000.0, 5000.0, 700.0, v[0], v[1], v[2], v[3], 1024.0, 30.0, smooth=True)

        v = jnp.array([128.0, 192.0, 64.0, 132.0])
        grad = np.asarray(jax.grad(f)(v))
        h = 1e-4
        fd = np.array([(f(v.at[i].add(h)) - f(v.at[i].add(-h))) / (2 * h) for i in range(4)])
        np.testing.assert_allclose(grad, fd, rtol=1e-6)
        # relaxed, the k-loop is k * tile_m * tile_n / macs whatever tile_k is
        assert np.all(grad[[0, 1, 3]] != 0.0) and grad[2] == 0.0


def test_jit_vmap_one_compile():
    """One compiled function serves every array shape (values are traced)."""
    f = jax.jit(lambda r, c, cores: gemm_cycles(512.0, 1000.0, 4096.0, r, c, "os", cores))
    sizes = [(32.0, 32.0, 1.0), (128.0, 64.0, 4.0), (256.0, 256.0, 2.0)]
    loop = [float(f(*s)) for s in sizes]
    assert f._cache_size() == 1
    batched = jax.vmap(f)(*map(jnp.array, zip(*sizes)))
    np.testing.assert_array_equal(batched, loop)
    # os on 32x32: ceil(512/32) * ceil(1000/32) = 16 * 32 folds of 32 + 32 + 4096 - 2
    assert loop[0] == 16 * 32 * (32 + 32 + 4096 - 2) - 1


def test_unknown_dataflow():
    with pytest.raises(ValueError, match="dataflow"):
        gemm_cycles(1, 1, 1, 4, 4, "rs")
