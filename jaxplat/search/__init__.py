"""Search at scale: studies (YAML axes over models, workloads, hardware and
parallelism), the sharded sweep engine with on-device reductions, block
layout, the hoisted outer part, persistence and resume, and the device and
compiler setup a caller applies (never on import). Imports `jaxplat.cost`,
`jaxplat.serving` and below.
"""

from jaxplat.search import alike
from jaxplat.search.devices import DeviceProfile, device_profile, max_block
from jaxplat.search.engine import AMONG_ALL, COUNTERS, Engine, available_metrics
from jaxplat.search.grid import MAX_BLOCK, Grid
from jaxplat.search.gridmap import grid_map, vmap_last
from jaxplat.search.runtime import compile_lowered, enable_compilation_cache, split_cpu_devices
from jaxplat.search.staging import split_shared
from jaxplat.search.study import AXIS_KINDS, METRICS, Axis, Study, load_study, study_from_dict
from jaxplat.search.sweep import STATE_FILE, Result, run

__all__ = ["AMONG_ALL", "AXIS_KINDS", "COUNTERS", "MAX_BLOCK", "METRICS", "STATE_FILE", "Axis", "DeviceProfile",
           "Engine", "Grid", "Result", "Study", "alike", "available_metrics", "compile_lowered", "device_profile",
           "enable_compilation_cache", "grid_map", "load_study", "max_block", "run", "split_cpu_devices",
           "split_shared", "study_from_dict", "vmap_last"]
