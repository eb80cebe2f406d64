"""Frozen dataclasses registered as JAX pytrees.

Fields marked with `static()` are part of the tree structure (hashable, and a
new value recompiles); every other field is a traced leaf.
"""

import dataclasses

import jax
import jax.numpy as jnp


def static(default=dataclasses.MISSING):
    """A static (non-traced) field: changing it invokes a recompilation."""
    return dataclasses.field(default=default, metadata={"static": True})


def pytree_dataclass(cls):
    """Make `cls` a frozen dataclass and register it with JAX."""
    cls = dataclasses.dataclass(frozen=True)(cls)
    data, meta = [], []
    for f in dataclasses.fields(cls):
        (meta if f.metadata.get("static") else data).append(f.name)
    return jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)


def as_f32(cls, **values):
    """Build `cls` with every non-static value cast to a float32 array.

    Python floats and ints would each give a fresh trace of a jitted function
    (weak types), so every numeric leaf is canonicalized here, once.
    """
    out = {}
    for f in dataclasses.fields(cls):
        if f.name not in values:
            continue
        v = values[f.name]
        out[f.name] = v if f.metadata.get("static") else jnp.asarray(v, jnp.float32)
    return cls(**out)


def replace(obj, **changes):
    """`dataclasses.replace` that casts new numeric leaves to float32."""
    fields = {f.name: f for f in dataclasses.fields(obj)}
    cast = {}
    for k, v in changes.items():
        if k not in fields:
            raise KeyError(f"{type(obj).__name__} has no field {k!r}")
        static = fields[k].metadata.get("static")
        cast[k] = v if static else jnp.asarray(v, jnp.float32)
    return dataclasses.replace(obj, **cast)
