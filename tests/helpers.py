"""Small test helpers (jaxplat ships no chex)."""

import jax
import numpy as np

from jaxplat.hardware import Hardware
from jaxplat.specs import hardware_from_dict, workload_from_dict

GiB = 2.0**30


def genz_system(tflops, mem_gbs, *, eff=1.0, link_gbs=25.0, link_us=1.9, mem_gb=1e9, onchip_gbs=18000.0) -> Hardware:
    """A GenZ `System(...)` in our hardware schema (GenZ: GB/s = 2^30 B/s)."""
    return hardware_from_dict({
        "flops": {"bf16": tflops * 1e12},
        "memory": [{"name": "sram", "size": 1e18, "bandwidth": onchip_gbs * GiB},
                   {"name": "hbm", "size": mem_gb * GiB, "bandwidth": mem_gbs * GiB}],
        "network": [{"domain": 1e6, "bandwidth": link_gbs * GiB, "latency": link_us * 1e-6}],
        "efficiency": {"compute": eff, "memory": eff},
    })


def workload(**kw):
    return workload_from_dict(kw)


def assert_trees_close(a, b, rtol=1e-6, atol=0.0):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x, np.float64), np.asarray(y, np.float64), rtol=rtol, atol=atol)
