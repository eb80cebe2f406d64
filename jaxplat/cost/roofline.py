"""Roofline per operator, and its exact sum over the decode steps.

An operator's time is max(compute time, memory time) plus its communication
time (collective rows carry only communication, other rows none), as in the
roofline model (Williams et al., CACM 2009) and GenZ (arXiv 2406.01698, Sec. 3).
In decode, FLOPs and bytes are affine in the number of generated tokens `s`
held in the KV cache, so each operator's time summed over a range of steps has
a closed form (a sum of the max of two affine functions).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

# Gauss-Legendre nodes for the smooth-mode decode sum (the smooth max of two
# affine functions is smooth, so 8 nodes integrate it to float32 accuracy).
_GL_X, _GL_W = np.polynomial.legendre.leggauss(8)


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


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def chosen_max(x, axis):
    """jnp.max(x, axis), differentiated as the chosen element (never NaN)."""
    return jnp.max(x, axis=axis)


@chosen_max.defjvp
def _chosen_max_jvp(axis, primals, tangents):
    (x,), (t,) = primals, tangents
    i = jnp.argmax(x, axis=axis, keepdims=True)
    return jnp.max(x, axis=axis), jnp.squeeze(jnp.take_along_axis(t, i, axis=axis), axis)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def chosen_min(x, axis):
    """jnp.min(x, axis), differentiated as the chosen element (never NaN)."""
    return jnp.min(x, axis=axis)


@chosen_min.defjvp
def _chosen_min_jvp(axis, primals, tangents):
    (x,), (t,) = primals, tangents
    i = jnp.argmin(x, axis=axis, keepdims=True)
    return jnp.min(x, axis=axis), jnp.squeeze(jnp.take_along_axis(t, i, axis=axis), axis)


def smooth_max(a, b, p):
    """p-norm smooth maximum of non-negative a, b: (a^p + b^p)^(1/p).

    Scale-free (times span 1e-9 to 1e3 s), at most 2^(1/p) above max(a, b),
    and tends to max(a, b) as p grows. Gradient-safe at a = b = 0.
    """
    m = jnp.maximum(a, b)
    ok = m > 0
    ms = jnp.where(ok, m, 1.0)
    r = (jnp.where(ok, a, 0.0) / ms) ** p + (jnp.where(ok, b, 0.0) / ms) ** p
    return jnp.where(ok, ms * r ** (1.0 / p), 0.0)


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


def sum_smooth_max_affine(c0, c1, m0, m1, lo, hi, p):
    """Smooth twin of `sum_max_affine`: Gauss-Legendre quadrature of the
    p-norm max over [lo - 1/2, hi + 1/2] (exact for affine integrands)."""
    n = jnp.maximum(hi - lo + 1.0, 0.0)
    mid = (lo + hi) / 2.0
    total = 0.0
    for x, w in zip(_GL_X, _GL_W):
        s = mid + 0.5 * n * float(x)
        total = total + float(w) * smooth_max(c0 + c1 * s, m0 + m1 * s, p)
    return 0.5 * n * total


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


__all__ = ["safe_div", "chosen_max", "chosen_min", "smooth_max", "combine", "sum_over_steps", "sum_max_affine"]
