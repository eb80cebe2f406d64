"""Search at scale: studies (YAML axes over models, workloads, hardware and
parallelism), the sharded sweep engine with on-device reductions, block
layout, the operator tables built apart (search.served), persistence and
resume, and the device and compiler setup a caller applies (never on
import). Imports `jaxplat.cost`, `jaxplat.serving` and below.

`METRICS`: the metrics a study ranks by and the sweep reports, name ->
(Metrics field, direction, unit).
"""

from jaxplat.search import alike
from jaxplat.search.devices import DeviceProfile, device_profile, max_block
from jaxplat.search.engine import AMONG_ALL, COUNTERS, Engine, available_metrics
from jaxplat.search.grid import MAX_BLOCK, Grid
from jaxplat.search.gridmap import grid_map, vmap_last
from jaxplat.search.runtime import compile_lowered, enable_compilation_cache, split_cpu_devices
from jaxplat.search.study import AXIS_KINDS, METRICS, Axis, Study
from jaxplat.search.sweep import STATE_FILE, Result, run
from jaxplat.search.train_study import load_study, study_from_dict  # inference or training (task: train)

# The public names (documented, kept stable). The other names imported above serve
# this project's own modules and older scripts; new code imports them from their module.
__all__ = ["METRICS", "Engine", "Result", "Study", "enable_compilation_cache", "load_study", "run",
           "split_cpu_devices", "study_from_dict"]
