"""Frozen dataclasses registered as JAX pytrees.

Fields marked with `static()` are part of the tree structure (hashable, and a
new value recompiles); every other field is a traced leaf.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np


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
    out, host = {}, {}
    for f in dataclasses.fields(cls):
        if f.name not in values:
            continue
        v = values[f.name]
        if f.metadata.get("static"):
            out[f.name] = v
        elif _host_number(v):
            host[f.name] = np.asarray(v, np.float32)
        else:  # a JAX array or a tracer (or anything else jnp.asarray takes)
            out[f.name] = jnp.asarray(v, jnp.float32)
    # The host's numbers as device arrays in one transfer: the same leaves as jnp.asarray makes one
    # by one, in less time (spec loading and the calibration's rows build tens of thousands;
    # experiments/bench_spec_load.py prints a set's milliseconds).
    out.update(jax.device_put(host))
    return cls(**out)


def _host_number(v) -> bool:
    """A Python or NumPy number, a NumPy array, or a list or tuple of numbers."""
    number = (int, float, np.number)
    if isinstance(v, (list, tuple)):
        return all(isinstance(x, number) and not isinstance(x, bool) for x in v)
    return isinstance(v, (*number, np.ndarray)) and not isinstance(v, bool)


def replace(obj, **changes):
    """`dataclasses.replace` that casts new numeric leaves to float32.

    A pytree of groups (`Hardware`) also takes the flat names its class lists
    in `flat_names` ({name: (group, field)}): `replace(hw, mem_bw=x)` is
    `replace(hw, memory=replace(hw.memory, bandwidth=x))`, as is
    `replace(hw, **{"memory.bandwidth": x})` (a "group.field" path). A group
    given whole is applied first, flat names and paths on top of it.
    """
    fields = {f.name: f for f in dataclasses.fields(obj)}
    flat = getattr(type(obj), "flat_names", {})
    cast, routed = {}, {}
    for k, v in changes.items():
        if k not in fields:
            group, _, field = k.partition(".")
            if not (field and group in fields) and k not in flat:
                raise KeyError(f"{type(obj).__name__} has no field {k!r}")
            group, field = (group, field) if field else flat[k]
            routed.setdefault(group, {})[field] = v
            continue
        static = fields[k].metadata.get("static")
        cast[k] = v if static or dataclasses.is_dataclass(v) else jnp.asarray(v, jnp.float32)
    for group, sub in routed.items():
        cast[group] = replace(cast.get(group, getattr(obj, group)), **sub)
    return dataclasses.replace(obj, **cast)


def get(obj, path: str):
    """The value at a "group.field" path (or a plain field name) of `obj`."""
    for name in path.split("."):
        obj = getattr(obj, name)
    return obj
