"""Design spaces of co-design: which chip numbers are the variables x.

"chip": x = (bf16 FLOP/s, SRAM bytes, HBM stacks, link bytes/s), the chip
as a roofline sees it.
"array": x = (array rows, array cols, cores, SRAM bytes per core, HBM
stacks, link bytes/s) on a base chip with systolic arrays (a `compute:`
block): the chip's peak follows, 2 x rows x cols x cores x clock (the
base's clock), its SRAM is cores x SRAM per core (each core's share is its
tiling buffer, jaxplat.cost.memory), and every GEMM costs its fold, fill
and drain cycles on that array shape (jaxplat.cost.compute). So the
gradient answers "which array shape for this workload", area and price
following from the MACs and the SRAM as in the chip space.

Both map to the chip vector (FLOP/s, SRAM, stacks, link) that prices a die
(jaxplat.cost.money) plus, for arrays, the array fields of `Hardware` and
each core's own area (Technology.area_per_core: more, smaller cores cost
die area as well as fill and drain time, which they save).
Integer variables (rows, cols, cores, stacks) are continuous during the
optimization and rounded (floor and ceil) at the end, then re-checked in
exact mode.
"""

import jax.numpy as jnp

SPACES = {
    "chip": ("flops", "sram", "hbm_stacks", "link_bw"),
    "array": ("rows", "cols", "cores", "sram_per_core", "hbm_stacks", "link_bw"),
}
UNITS = {"flops": "FLOP/s (bf16, dense)", "sram": "bytes", "hbm_stacks": "stacks", "link_bw": "bytes/s",
         "rows": "PEs", "cols": "PEs", "cores": "arrays", "sram_per_core": "bytes"}
INTEGER = ("rows", "cols", "cores", "hbm_stacks")
INFLATE = ("flops", "link_bw")  # nudged up a little when rounding (the smooth optimum sits on a boundary)


def space_of(names) -> str:
    """The space whose variables include all of `names` (chip first), or ''."""
    for space, params in SPACES.items():
        if set(names) <= set(params):
            return space
    return ""


def chip_vector(x, space: str, base):
    """[..., 4] (FLOP/s, SRAM bytes, HBM stacks, link bytes/s) of designs x [..., P]."""
    if space == "chip":
        return x
    rows, cols, cores, sram_core, stacks, link = (x[..., i] for i in range(6))
    flops = 2.0 * rows * cols * cores * base.chip.clock_hz
    return jnp.stack([flops, cores * sram_core, stacks, link], axis=-1)


def cores(x, space: str):
    """Compute cores of the design (0 in the chip space, which has none)."""
    return x[..., 2] if space == "array" else 0.0


def array_fields(x, space: str) -> dict:
    """`Hardware` fields the design sets beyond the chip vector's."""
    if space != "array":
        return {}
    return {"array_rows": x[..., 0], "array_cols": x[..., 1], "cores": x[..., 2]}


def defaults(space: str, base, tech) -> dict:
    """Each variable's value on the base chip (the study's fixed default)."""
    stacks = max(round(float(base.memory.bandwidth[0]) / float(tech.stack_bw)), 1)
    if space == "chip":
        from jaxplat.specs.units import DTYPES
        return {"flops": float(base.chip.flops[DTYPES.index("bf16")]), "sram": max(float(base.memory.sram_size), 1e6),
                "hbm_stacks": stacks, "link_bw": float(base.network.bandwidth[0])}
    cores = float(base.chip.cores)
    return {"rows": float(base.chip.array_rows), "cols": float(base.chip.array_cols), "cores": cores,
            "sram_per_core": max(float(base.memory.sram_size), 1e6) / cores, "hbm_stacks": stacks,
            "link_bw": float(base.network.bandwidth[0])}


__all__ = ["INFLATE", "INTEGER", "SPACES", "UNITS", "array_fields", "chip_vector", "cores", "defaults", "space_of"]
