"""staging.split_shared: post(pre(shared), point) is f(shared, point), and
the shared-only work is in pre alone."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.search import split_shared


def _f(s, p):
    t = jnp.arange(4.0, dtype=jnp.float32) * s["a"] + s["b"]  # shared only
    mixed = jax.jit(lambda x, y: x * y + jnp.sin(x))  # called twice: two scopes
    u = mixed(t, p)
    v = jax.jit(lambda x: jnp.cumsum(x))(t)  # a shared-only call
    w = jax.nn.relu(mixed(t, -p))  # a custom_jvp call with a point input
    return dict(u=u, both=u + w + v[-1], n=(t > 1.5).sum(), const=jnp.float32(3.0), twice=s["a"] * 2, p=p)


S = dict(a=jnp.float32(1.5), b=jnp.float32(-0.25))
P = jnp.float32(0.7)


def test_post_of_pre_is_f():
    pre, post = split_shared(_f, S, P)
    res = pre(S)
    want, got = _f(S, P), post(res, P)
    for k in want:  # the same operations, fused differently by XLA: to float32 rounding
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, err_msg=k)
    assert got["n"] == 2 and got["n"].dtype == want["n"].dtype
    # Another point, the same residuals; another shared value under vmap.
    np.testing.assert_allclose(post(res, jnp.float32(-2.0))["both"], _f(S, jnp.float32(-2.0))["both"], rtol=1e-6)
    many = dict(a=jnp.array([1.5, 2.0], jnp.float32), b=jnp.array([-0.25, 0.5], jnp.float32))
    rows = jax.vmap(pre)(many)
    for j in range(2):
        one = {k: v[j] for k, v in many.items()}
        np.testing.assert_allclose(post([r[j] for r in rows], P)["both"], _f(one, P)["both"], rtol=1e-6)


def test_shared_work_is_in_pre_only():
    pre, post = split_shared(_f, S, P)
    shapes = jax.eval_shape(pre, S)
    pre_ops = str(jax.make_jaxpr(pre)(S))
    post_ops = str(jax.make_jaxpr(post)(pre(S), P))
    # sin and cumsum read only shared values: computed once in pre.
    assert "sin" in pre_ops and "cumsum" in pre_ops
    assert "sin" not in post_ops and "cumsum" not in post_ops
    assert "mul" in post_ops and "max" in post_ops  # x * p and relu need the point
    # The residuals are packed, one 1-D array per dtype.
    assert len(shapes) == len({s.dtype for s in shapes}) and all(s.ndim == 1 for s in shapes)
