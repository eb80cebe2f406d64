"""Compute cycles of a GEMM on systolic arrays and on tensor-core GPUs.

A GEMM here is (M x K) . (K x N) -> (M x N). Both machines cut it into pieces
that fit the hardware (folds of a systolic array, output tiles of a GPU), run
the pieces in waves over the cores or SMs, and pay for every piece in full even
where the GEMM fills it only in part. That quantization is what makes array
shape, core count and tile shape matter; a FLOP count divided by peak misses it.

Systolic arrays follow SCALE-Sim (Samajdar et al., arXiv 1811.02883; the
numbers are those of its source, `scalesim` 3.0.0 on PyPI, which
tests/data/scalesim/ holds as reference). GPUs follow NVIDIA's account of tile
and wave quantization (Deep Learning Performance docs, "Matrix Multiplication
Background User's Guide"; CUTLASS `media/docs/efficient_gemm.md`).

Every argument but `dataflow` and `smooth` may be a traced float array, so the
functions jit, vmap and (with smooth=True) differentiate in the hardware
numbers. Exact mode counts in integers held as floats: exact up to 2**24
cycles in float32. `DATAFLOWS`: the systolic dataflows, "ws" (weight
stationary), "os" (output stationary), "is" (input stationary).
"""

import jax.numpy as jnp

from jaxplat.specs import SpecError

DATAFLOWS = ("ws", "os", "is")


def fold_count(x, smooth=False):
    """Pieces needed to cover a share x > 0 of a dimension: ceil(x).

    smooth=True gives a differentiable stand-in that equals ceil(x) wherever
    the dimension divides evenly (x a whole number) and wherever it fits in
    one piece (x <= 1): max(x, 1), its kink at x = 1 rounded on [1, 2] by the
    cubic 1 + t^2 (2 - t), t = x - 1, which matches value and slope at both
    ends (C1), rises monotonically and stays between 1 and x. Between whole
    numbers it lies below ceil (the padding of a partial piece is not
    charged), as any continuous relaxation of a staircase must somewhere.
    """
    x = jnp.asarray(x, dtype=jnp.result_type(float, x))
    if not smooth:
        return jnp.ceil(x)
    t = jnp.clip(x - 1.0, 0.0, 1.0)  # clipped so neither branch leaks a gradient
    return jnp.where(x >= 2.0, x, 1.0 + t * t * (2.0 - t))


def wave_count(pieces, units, smooth=False):
    """Waves to run `pieces` equal pieces on `units` parallel units.

    ceil(pieces / units): the last wave is paid in full even when partly idle
    (NVIDIA, "Matrix Multiplication Background", wave quantization).
    """
    return fold_count(pieces / units, smooth)


def _spatial_temporal(m, n, k, dataflow):
    """(S_R, S_C, T): the GEMM dims on array rows, array columns and time.

    SCALE-Sim maps operand matrices, not dims: the ifmap (activation) is
    M x K, the filter (weight) K x N (GEMM topology rows "M, N, K" become
    ifmap M x K, N filters of K; scalesim/topology_utils.py, load_arrays_gemm).
    set_params of scalesim/compute/systolic_compute_{ws,os,is}.py then takes
      ws: S_R = ifmap cols = K, S_C = filter cols = N, T = ifmap rows = M
      os: S_R = ifmap rows = M, S_C = filter cols = N, T = ifmap cols = K
      is: S_R = ifmap cols = K, S_C = ifmap rows = M, T = filter cols = N
    """
    if dataflow == "ws":
        return k, n, m
    if dataflow == "os":
        return m, n, k
    if dataflow == "is":
        return k, m, n
    raise SpecError(f"dataflow must be one of {DATAFLOWS}, got {dataflow!r}")


def fold_cycles(rows, cols, t, dataflow="ws"):
    """Cycles of one fold on a rows x cols array streaming t operand vectors.

    SCALE-Sim builds one output-demand line per cycle; a fold of the ws and is
    dataflows has 2*rows - 1 lines of fill (stationary operand loaded, first
    partial sums pushed down), then t lines of streaming, then cols - 1 lines
    of skew as the last column drains (create_ofmap_demand_mat and
    skew_matrix in systolic_compute_ws.py / _is.py): 2 rows + cols + t - 2,
    the paper's tau = 2 S_R + S_C + T - 2 with S_R, S_C the array (1811.02883,
    runtime of one fold). In os nothing is preloaded: t - 1 lines of prefix,
    rows lines of outputs, cols - 1 of skew (systolic_compute_os.py), so
    rows + cols + t - 2, one array height less than the paper's formula.
    """
    fill = 0.0 if dataflow == "os" else rows
    return fill + rows + cols + t - 2.0


def gemm_cycles(m, n, k, rows, cols, dataflow="ws", cores=1, smooth=False, groups=1):
    """Compute cycles of an (m x k) . (k x n) GEMM on systolic arrays.

    SCALE-Sim's "Total Cycles" (COMPUTE_REPORT.csv): compute only, no DRAM
    prefetch, no stalls. The GEMM is cut into ceil(S_R / rows) x
    ceil(S_C / cols) folds (dims mapped by the dataflow, see
    `_spatial_temporal`); each fold costs `fold_cycles`, run back to back
    (SCALE-Sim concatenates the folds' demand matrices). With cores > 1 the
    folds are spread over identical arrays and run in ceil(folds / cores)
    waves, the cores working in parallel (our extension; SCALE-Sim 3.0.0 on
    PyPI simulates one array). SCALE-Sim reports the index of the last cycle,
    counted from 0 (max of its serviced cycles in
    memory/double_buffered_scratchpad_mem.py), so the total is the count
    minus one; kept here so the numbers compare one to one.

    Args:
      m, n, k: GEMM dims (floats or arrays >= 1): output rows, output
        columns, reduction length.
      rows, cols: processing elements (PEs) per array, in height and width.
      dataflow: "ws" (weight stationary), "os" (output stationary) or "is"
        (input stationary); static.
      cores: number of identical arrays working in parallel.
      smooth: replace ceil by `fold_count`'s differentiable stand-in, which
        agrees with exact mode wherever the dims and the fold count divide
        evenly (and where a dim fits in one fold).
      groups: independent GEMMs of this shape run together (attention
        heads): their folds share the waves over the cores. 1 is SCALE-Sim's
        single GEMM.

    Returns:
      Cycles (float array, the broadcast shape of the arguments).
    """
    sr, sc, t = _spatial_temporal(m, n, k, dataflow)
    folds = groups * fold_count(sr / rows, smooth) * fold_count(sc / cols, smooth)
    return wave_count(folds, cores, smooth) * fold_cycles(rows, cols, t, dataflow) - 1.0


def tile_cycles(m, n, k, tile_m, tile_n, tile_k, units, macs_per_cycle, overhead=0.0, smooth=False):
    """Compute cycles of an (m x k) . (k x n) GEMM on a tensor-core GPU.

    The output is cut into ceil(m / tile_m) x ceil(n / tile_n) tiles (tile
    quantization: a partial tile costs a full one), the tiles run in
    ceil(tiles / units) waves over the SMs (wave quantization), and each tile
    loops over ceil(k / tile_k) k-steps of tile_m x tile_n x tile_k
    multiply-adds at macs_per_cycle per SM (NVIDIA, "Matrix Multiplication
    Background User's Guide"; CUTLASS efficient_gemm.md: threadblock tiles,
    mainloop over K). `overhead` adds cycles per wave for the tile's prologue
    and epilogue (pipeline fill, storing C). One tile per SM at a time and a
    k-step at full tensor-core rate: an upper bound on speed that the memory
    side and the efficiency model temper.

    Args:
      m, n, k: GEMM dims (>= 1).
      tile_m, tile_n, tile_k: threadblock tile, e.g. 128, 128, 64.
      units: SMs.
      macs_per_cycle: dense multiply-adds per cycle per SM at the dtype
        (H100 SXM BF16: 989e12 FLOP/s / (2 x 132 SMs x 1.83e9 Hz) ~ 2048).
      overhead: cycles per wave outside the k-loop.
      smooth: differentiable stand-in for ceil, as in `gemm_cycles`.

    Returns:
      Cycles (float array, the broadcast shape of the arguments).
    """
    tiles = fold_count(m / tile_m, smooth) * fold_count(n / tile_n, smooth)
    ksteps = fold_count(k / tile_k, smooth)
    step = tile_m * tile_n * tile_k / macs_per_cycle
    return wave_count(tiles, units, smooth) * (ksteps * step + overhead)


__all__ = ["DATAFLOWS", "fold_count", "fold_cycles", "gemm_cycles", "tile_cycles", "wave_count"]
