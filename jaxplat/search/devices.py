"""Block sizes per device kind: what a sweep step may hold on one device.

XLA:CPU (jax 0.10.2) returns wrong results for a vmap of `evaluate` over more
than 2^15 points (experiments/xla_cpu_vmap_repro.py: a jax-only reproducer),
so on the CPU a block holds at most 2^15 configurations. The defect is in
XLA:CPU's code generation; on GPUs a vmap of 2^22 points gives the results of
2^15-point chunks (issue 15, measured on an H200 with jax 0.11.2), so there
blocks are sized to the device's memory instead, and a step runs few of them
(each step is one dispatch: the host merges one step while the next runs).
"""

import dataclasses

import jax

# Largest vmap of evaluate XLA:CPU gets right (see the module docstring).
CPU_MAX_BLOCK = 2**15
# Device bytes a block may use per configuration, for sizing blocks on
# accelerators. XLA's temp buffers per configuration of a step: 13 B for the
# factorized bench, 38 B for specs/studies/catalog-parallelism.yaml in CPU
# chunks, 5.9 KB for that study's blocks evaluated whole, as on accelerators
# (XLA:CPU's memory_analysis; experiments/bench_sweep.py prints the first
# two); the last, rounded up.
BYTES_PER_CONFIG = 8 << 10
# Blocks on accelerators: at least this many configurations (a smaller block
# leaves the device launch-bound: 2^15-point blocks ran 8x slower on an H200,
# issue 15) and at most this many (one step's temp buffers stay < ~35 GB).
ACCEL_MIN_BLOCK, ACCEL_MAX_BLOCK = 2**20, 2**22
# Outer points a CPU step evaluates at once in a study without hardware axes
# (Engine._outer_points), so that each intermediate stays in the caches.
# Measured on catalog-parallelism.yaml (2-core CPU, one device, blocks of
# 16384): 32 -> 4.8, 64 -> 3.5, 128 -> 2.8, 256 -> 3.2, 512 -> 4.5 us of CPU
# per configuration.
CPU_EVAL_CHUNK = 128
# A regridded study (search.engine.layout) on the CPU: its trailing grid axes
# share one last dim of at most this many points (gridmap.block_grid's
# merge), so that XLA:CPU's loops vectorize over a long minor dim; the
# catalog's last axis is sp (2 values). Measured on catalog-parallelism.yaml
# (2-core CPU, 8448-point grids, CPU time of evaluate per configuration):
# no merge 4.2 us, merged to 66 points 1.3 us, to 264 points 1.2 us, to
# 1056 points 4.5 us; results bit-identical.
CPU_GRID_MINOR = 512


@dataclasses.dataclass(frozen=True)
class DeviceProfile:
    """How a sweep lays out its work on one kind of device.

    Attributes:
      platform: 'cpu', 'gpu', 'tpu'... max_block: the most configurations a
        block may hold (None: no limit but memory). block: the default
        configurations per block. blocks_per_step: the default blocks each
        device runs per step. eval_chunk: outer points evaluated at once in
        a study without hardware axes (None: the whole block). grid_minor:
        points of the merged last dim of a regridded study's grid (None: no
        merge).
    """

    platform: str
    max_block: int | None
    block: int
    blocks_per_step: int
    eval_chunk: int | None
    grid_minor: int | None = None


def device_profile(device=None) -> DeviceProfile:
    """The `DeviceProfile` of `device` (default: the first device)."""
    device = device or jax.devices()[0]
    if device.platform == "cpu":
        return DeviceProfile("cpu", CPU_MAX_BLOCK, CPU_MAX_BLOCK, 4, CPU_EVAL_CHUNK, CPU_GRID_MINOR)
    return DeviceProfile(device.platform, None, accelerator_block(device_memory(device)), 2, None)


def device_memory(device) -> int | None:
    """Bytes of memory the device offers XLA, if it says."""
    try:
        stats = device.memory_stats() or {}
    except Exception:  # noqa: BLE001 (some backends do not implement it)
        return None
    return stats.get("bytes_limit")


def accelerator_block(memory: int | None) -> int:
    """Configurations per block on an accelerator with `memory` bytes: the
    largest power of 2 whose temp buffers take at most a quarter of it,
    within [ACCEL_MIN_BLOCK, ACCEL_MAX_BLOCK] (the minimum when unknown)."""
    if not memory:
        return ACCEL_MIN_BLOCK
    b = ACCEL_MIN_BLOCK
    while b * 2 <= ACCEL_MAX_BLOCK and b * 2 * BYTES_PER_CONFIG <= memory // 4:
        b *= 2
    return b


def max_block(platform: str) -> int | None:
    """The most points one vmap of `evaluate` may hold on `platform` (None: no cap)."""
    return CPU_MAX_BLOCK if platform == "cpu" else None


__all__ = ["CPU_MAX_BLOCK", "DeviceProfile", "accelerator_block", "device_profile", "max_block"]
