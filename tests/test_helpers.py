"""The test helpers themselves fail when they should."""

import jax
import jax.numpy as jnp
import pytest
from helpers import assert_trees_close, compile_events


def test_assert_trees_close_compares_every_leaf():
    a = {"x": jnp.float32(1.0), "y": [jnp.float32(2.0), jnp.float32(3.0)]}
    assert_trees_close(a, {"x": 1.0, "y": [2.0, 3.0 * (1 + 1e-7)]})
    with pytest.raises(AssertionError, match=r"\['y'\]\[1\]"):  # names the leaf that differs
        assert_trees_close(a, {"x": 1.0, "y": [2.0, 3.1]})
    with pytest.raises(AssertionError):  # one leaf fewer: not silently truncated
        assert_trees_close(a, {"x": 1.0, "y": [2.0]})


def test_compile_events_sees_a_compile_and_not_a_cache_hit():
    f = jax.jit(lambda x: x * 3.0 + 1.0)
    with compile_events() as first:
        f(jnp.float32(1.0))
    with compile_events() as again:
        f(jnp.float32(2.0))
    assert first and again == []
