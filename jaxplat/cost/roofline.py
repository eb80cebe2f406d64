"""Roofline per operator, and its exact sum over the decode steps.

An operator's time is max(compute time, memory time) plus its communication
time (collective rows carry only communication, other rows none), as in the
roofline model (Williams et al., CACM 2009) and GenZ (arXiv 2406.01698, Sec. 3).
In decode, FLOPs and bytes are affine in the number of generated tokens `s`
held in the KV cache, so each operator's time summed over a range of steps has
a closed form (a sum of the max of two affine functions).
"""

import jax
import jax.numpy as jnp
import numpy as np

# Smooth-mode decode sum (`sum_smooth_max_affine`): the exact sum of the max
# plus the sum of the smooth max's excess over it, which is peaked at the
# crossover of the two affine functions. The excess is summed term by term on
# _WINDOW integers around the crossover and integrated beyond them on a graded
# mesh (pieces _FIRST, 4x_FIRST, 16x_FIRST, ... steps long, _NODES
# Gauss-Legendre nodes each) with the Euler-Maclaurin end correction that
# turns the integral back into a sum. Sized against an exact float64 loop over
# steps (1 to 5e5 steps, p = 20 to 300): worst relative error ~2e-6
# (tests/test_physics.py); 8 plain Gauss-Legendre nodes were 1e-3 to 1e-1 off.
_WINDOW, _NODES, _FIRST, _GROWTH, _PIECES = 8, 4, 2.0, 4.0, 10
_GL_X, _GL_W = np.polynomial.legendre.leggauss(_NODES)


def safe_div(num, den):
    """num / den, and 0 where den == 0 (gradient-safe: both branches guarded)."""
    ok = den != 0
    return jnp.where(ok, num / jnp.where(ok, den, 1.0), 0.0)


# jnp.max / jnp.min differentiate as the mean tangent of the elements that
# compare equal to the result. XLA may compute the operand and the result in
# different fusions with different rounding (constant folding of a closed-over
# chip, FMA contraction), so that no element compares equal and the
# derivative is 0/0 = NaN: every sensitivity of TPOT was (issue 16). These
# twins compute the same value (the same forward program, so sweeps are
# unchanged) and differentiate as the element the argmax/argmin picks (the
# first at ties): an index always exists, so never NaN.


def _chosen(reduce, pick, name):
    """`reduce(x, axis)` as a custom_jvp whose tangent is the picked element's."""

    def f(x, axis):
        return reduce(x, axis=axis)

    f.__name__ = name
    f.__doc__ = f"jnp.{reduce.__name__}(x, axis), differentiated as the chosen element (never NaN)."
    f = jax.custom_jvp(f, nondiff_argnums=(1,))

    @f.defjvp
    def _jvp(axis, primals, tangents):
        (x,), (t,) = primals, tangents
        i = pick(x, axis=axis, keepdims=True)
        return reduce(x, axis=axis), jnp.squeeze(jnp.take_along_axis(t, i, axis=axis), axis)

    return f


chosen_max = _chosen(jnp.max, jnp.argmax, "chosen_max")
chosen_min = _chosen(jnp.min, jnp.argmin, "chosen_min")


def smooth_max(a, b, p):
    """p-norm smooth maximum of non-negative a, b: (a^p + b^p)^(1/p).

    Scale-free (times span 1e-9 to 1e3 s), at most 2^(1/p) above max(a, b),
    and tends to max(a, b) as p grows. Gradient-safe at a = b = 0, and in p
    where a side is 0 (no log(0) in d/dp).
    """
    m = jnp.maximum(a, b)
    ok = m > 0
    # The norm is 1-homogeneous, so its gradient does not flow through the scale m: cutting that path keeps
    # d/dm's x/m^2 from underflowing to an infinity at times of 1e-20 s and below.
    ms = jax.lax.stop_gradient(jnp.where(ok, m, 1.0))

    def term(x):  # (x / max)^p, 0 where x is 0; the discarded branch's ratio is 1 (no overflow in its gradient)
        live = ok & (x > 0)
        return jnp.where(live, (jnp.where(live, x, ms) / ms) ** p, 0.0)
    r = jnp.where(ok, term(a) + term(b), 1.0)  # 1 where both are 0: r^(1/p) has no infinite slope there
    return jnp.where(ok, ms * r ** (1.0 / p), 0.0)


def overlap_max(a, b, q):
    """Elementwise max(a, b) where q is 0, else smooth_max(a, b, q): a kernel
    whose streams and math overlap imperfectly (2^(1/q) x the max where they
    are equal). Gradient-safe in q and where a side is 0."""
    on = q > 0
    return jnp.where(on, smooth_max(a, b, jnp.where(on, q, 1.0)), jnp.maximum(a, b))


def combine(compute, memory, comm, p=None):
    """Operator time from its three components, seconds (elementwise)."""
    core = jnp.maximum(compute, memory) if p is None else smooth_max(compute, memory, p)
    return core + comm


def _sum_affine(alpha, beta, lo, hi):
    """Sum of alpha + beta*s over integers s in [lo, hi] (0 if lo > hi)."""
    n = jnp.maximum(hi - lo + 1.0, 0.0)
    return n * alpha + beta * (lo + hi) * n / 2.0


def _sum_relu_affine(alpha, beta, lo, hi):
    """Sum of max(alpha + beta*s, 0) over integers s in [lo, hi]."""
    root = -safe_div(alpha, beta)  # where alpha + beta*s crosses zero
    lo_pos = jnp.where(beta > 0, jnp.maximum(lo, jnp.floor(root) + 1.0), lo)
    hi_pos = jnp.where(beta < 0, jnp.minimum(hi, jnp.ceil(root) - 1.0), hi)
    flat = (beta == 0) & (alpha <= 0)  # constant and non-positive: nothing
    total = _sum_affine(alpha, beta, lo_pos, hi_pos)
    return jnp.where(flat, 0.0, jnp.maximum(total, 0.0))


def sum_max_affine(c0, c1, m0, m1, lo, hi):
    """Exact sum over integer s in [lo, hi] of max(c0 + c1*s, m0 + m1*s).

    Splits the range at the crossover: sum(m) + sum(relu(c - m)).
    """
    return _sum_affine(m0, m1, lo, hi) + _sum_relu_affine(c0 - m0, c1 - m1, lo, hi)


def _excess(a, b, p):
    """smooth_max(a, b, p) - max(a, b) for a, b >= 0, without cancellation:
    max * expm1(log1p(r^p) / p), r = min / max."""
    m = jnp.maximum(a, b)
    ok = m > 0
    ms = jnp.where(ok, m, 1.0)
    r = jnp.where(ok, jnp.minimum(a, b), 0.0) / ms
    return jnp.where(ok, ms * jnp.expm1(jnp.log1p(r ** p) / p), 0.0)


def _excess_slope(c0, c1, m0, m1, s, p):
    """d/ds of `_excess` at c = c0 + c1 s, m = m0 + m1 s."""
    a, b = c0 + c1 * s, m0 + m1 * s
    m = jnp.maximum(a, b)
    ok = m > 0
    ms = jnp.where(ok, m, 1.0)
    # masked rows (a = b = 0) get ratios 1, so no branch divides by zero (gradients)
    ra, rb = jnp.where(ok, a / ms, 1.0), jnp.where(ok, b / ms, 1.0)
    norm = (ra ** p + rb ** p) ** (1.0 / p)  # smooth_max / max, in [1, 2^(1/p)]
    slope = (ra ** (p - 1.0) * c1 + rb ** (p - 1.0) * m1) / norm ** (p - 1.0)
    return jnp.where(ok, slope - jnp.where(a >= b, c1, m1), 0.0)


def _graded_pieces():
    """Static (start, end) distances of the graded mesh pieces from a window
    edge, the last one open (its end is the tail's length)."""
    ends = _FIRST * (_GROWTH ** np.arange(1, _PIECES + 1) - 1.0) / (_GROWTH - 1.0)
    ends[-1] = np.inf
    return np.concatenate([[0.0], ends[:-1]]), ends


def sum_smooth_max_affine(c0, c1, m0, m1, lo, hi, p):
    """Smooth twin of `sum_max_affine`: the sum over integer s in [lo, hi]
    of smooth_max(c0 + c1 s, m0 + m1 s, p), to ~1e-5 relative at p <= 300.

    The exact sum of the max (closed form) plus the excess of the smooth max,
    which is largest at the crossover s* and decays away from it: summed
    exactly on the _WINDOW integers nearest s*, integrated on each side on a
    graded Gauss-Legendre mesh over [lo - 1/2, window) and (window, hi + 1/2]
    with the first Euler-Maclaurin correction, -(f'(b) - f'(a)) / 24, that
    makes a midpoint integral a sum (Abramowitz & Stegun 23.1.30 / 25.4.7).
    """
    c0, c1, m0, m1 = jnp.broadcast_arrays(*(jnp.asarray(x, jnp.result_type(float)) for x in (c0, c1, m0, m1)))
    n = jnp.maximum(hi - lo + 1.0, 0.0)
    base = sum_max_affine(c0, c1, m0, m1, lo, hi)
    star = safe_div(m0 - c0, c1 - m1)  # crossover (0 when parallel: any point will do)
    top = jnp.maximum(lo, hi - _WINDOW + 1.0)
    j0 = jnp.clip(jnp.round(star) - _WINDOW // 2, lo, top)  # window j0 .. j1
    j1 = jnp.minimum(j0 + _WINDOW - 1.0, hi)
    ex = lambda s: _excess(c0[..., None] + c1[..., None] * s, m0[..., None] + m1[..., None] * s, p)  # noqa: E731
    win = j0[..., None] + np.arange(_WINDOW, dtype=np.float32)
    total = jnp.sum(jnp.where(win <= hi, ex(win), 0.0), axis=-1)
    d0, d1 = _graded_pieces()
    for edge, length, sign in ((j0 - 0.5, j0 - lo, -1.0), (j1 + 0.5, hi - j1, 1.0)):
        length = jnp.maximum(length, 0.0)[..., None]
        a, b = jnp.minimum(d0, length), jnp.minimum(d1, length)  # [..., pieces]
        half = 0.5 * (b - a)
        mid = edge[..., None] + sign * 0.5 * (a + b)
        s = (mid[..., None] + sign * half[..., None] * _GL_X).reshape(mid.shape[:-1] + (-1,))
        w = (half[..., None] * _GL_W).reshape(s.shape)
        far = edge + sign * length[..., 0]
        em = _excess_slope(c0, c1, m0, m1, jnp.maximum(edge, far), p) \
            - _excess_slope(c0, c1, m0, m1, jnp.minimum(edge, far), p)
        total = total + jnp.sum(w * ex(s), axis=-1) - em / 24.0
    return jnp.where(n > 0, base + total, 0.0)


def sum_over_steps(c0, c1, m0, m1, comm, lo, hi, p=None):
    """Per-row time summed over decode steps s = lo..hi, seconds.

    Args:
      c0, c1: compute time at s = 0 and its slope per generated token [rows].
      m0, m1: memory time likewise [rows].
      comm: communication time per step [rows] (independent of s).
      lo, hi: first and last step (scalars).
      p: None for the exact max, else the p-norm exponent of the smooth max.
    Returns:
      [rows] seconds.
    """
    n = jnp.maximum(hi - lo + 1.0, 0.0)
    if p is None:
        core = sum_max_affine(c0, c1, m0, m1, lo, hi)
    else:
        core = sum_smooth_max_affine(c0, c1, m0, m1, lo, hi, p)
    return core + n * comm


__all__ = ["safe_div", "chosen_max", "chosen_min", "smooth_max", "overlap_max", "combine", "sum_over_steps",
           "sum_max_affine"]
