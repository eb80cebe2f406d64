"""Helpers for GenZ users: GenZ's `System(...)` and model names in our schema.

GenZ (arXiv 2406.01698; GenZ-LLM-Analyzer) states bandwidths in GB/s with
GB = 2^30 bytes, FLOP/s in TFLOPS (1e12) and on-chip bandwidth 18000 GB/s by
default (tests/data/genz/README.md). Use with `Options(profile="genz")`.
"""

from jaxplat.model.hardware import Hardware
from jaxplat.model.hardware_spec import hardware_from_dict

GENZ_GB = 2.0**30  # GenZ's GB (and GB/s) unit, bytes


def genz_system(flops=300.0, offchip_mem_bw=1200.0, *, compute_efficiency=1.0, memory_efficiency=1.0,
                off_chip_mem_size=1e9, onchip_mem_bw=18000.0, interchip_link_bw=25.0,
                interchip_link_latency=1.9, tdp_w=700.0) -> Hardware:
    """The chip of GenZ's `System(...)`, keyword for keyword, in GenZ's units.

    Args:
      flops: TFLOPS (bf16). offchip_mem_bw, onchip_mem_bw, interchip_link_bw:
        GB/s (2^30 B/s). off_chip_mem_size: GB (2^30 B). interchip_link_latency: µs.
      tdp_w: board power, W. GenZ's System has none; the default is H100
        SXM's 700 W (datasheet), the class of GenZ's presets, so that static
        power and the power limit have a number (the genz profile applies
        no power limit).
    """
    return hardware_from_dict({
        "flops": {"bf16": flops * 1e12},
        "memory": [{"name": "sram", "size": 1e18, "bandwidth": onchip_mem_bw * GENZ_GB},
                   {"name": "hbm", "size": off_chip_mem_size * GENZ_GB, "bandwidth": offchip_mem_bw * GENZ_GB}],
        "network": [{"domain": 1e6, "bandwidth": interchip_link_bw * GENZ_GB,
                     "latency": interchip_link_latency * 1e-6}],
        "efficiency": {"compute": compute_efficiency, "memory": memory_efficiency},
        "tdp_w": tdp_w,
    }, src="genz_system")


# GenZ's H100_GPU preset (tests/data/genz/README.md).
def genz_h100() -> Hardware:
    return genz_system(989.0, 3400.0, off_chip_mem_size=80.0, interchip_link_bw=450.0, interchip_link_latency=1.0)
