"""Small test helpers (jaxplat ships no chex)."""

import jax
import numpy as np

from jaxplat.model import Hardware, workload_from_dict
from jaxplat.model import genz_system as _genz_system

GiB = 2.0**30


def genz_system(tflops, mem_gbs, *, eff=1.0, link_gbs=25.0, link_us=1.9, mem_gb=1e9, onchip_gbs=18000.0) -> Hardware:
    """A GenZ `System(...)` in our hardware schema (GenZ: GB/s = 2^30 B/s)."""
    return _genz_system(tflops, mem_gbs, compute_efficiency=eff, memory_efficiency=eff, off_chip_mem_size=mem_gb,
                        onchip_mem_bw=onchip_gbs, interchip_link_bw=link_gbs, interchip_link_latency=link_us)


def workload(**kw):
    return workload_from_dict(kw)


def assert_trees_close(a, b, rtol=1e-6, atol=0.0):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x, np.float64), np.asarray(y, np.float64), rtol=rtol, atol=atol)
