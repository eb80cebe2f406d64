"""A process node and HBM generation as a pytree, from specs/technology."""

import dataclasses
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxplat.model.pytree import as_f32, pytree_dataclass
from jaxplat.specs import SPEC_ROOT, SpecError, check_keys, choice, number, read_yaml
from jaxplat.specs.units import DTYPES


@pytree_dataclass
class Technology:
    """A process node plus one HBM generation, SI units except areas (mm²).

    Attributes:
      area_per_flops: mm² per dense bf16 FLOP/s of tensor units.
      flops_ratio: [len(DTYPES)] peak in each dtype relative to bf16.
      area_per_sram_byte: mm² per byte of SRAM (macros with periphery).
      sram_bw_per_flops: SRAM bytes/s provided per bf16 FLOP/s.
      area_hbm_phy: mm² of PHY and controller per HBM stack.
      area_per_link_bw: mm² per byte/s (one direction) of scale-up links.
      area_fixed: mm² of everything else (host I/O, control, media...).
      reticle: largest die, mm². max_stacks: most HBM stacks per package.
      wafer_cost: USD per wafer. wafer_diameter: mm.
      defect_density: defects per mm². yield_alpha: clustering parameter.
      packaging_cost, overhead_cost: USD per chip (interposer and assembly;
        board, host and network share). markup: price / manufacturing cost.
      leakage: static W per mm². power_limit: most W per chip.
      energy_flop: [len(DTYPES)] J/FLOP. energy_sram, energy_hbm: J/byte.
      energy_link: J per byte sent on the scale-up links.
      stack_bytes, stack_bw, stack_cost: one HBM stack: bytes, bytes/s, USD.
      area_per_core: mm² each compute core adds beyond its MACs and SRAM
        (sequencer, DMA, NoC router); charged by co-design's array space.
    """

    area_per_flops: jax.Array
    flops_ratio: jax.Array
    area_per_sram_byte: jax.Array
    sram_bw_per_flops: jax.Array
    area_hbm_phy: jax.Array
    area_per_link_bw: jax.Array
    area_fixed: jax.Array
    reticle: jax.Array
    max_stacks: jax.Array
    wafer_cost: jax.Array
    wafer_diameter: jax.Array
    defect_density: jax.Array
    yield_alpha: jax.Array
    packaging_cost: jax.Array
    overhead_cost: jax.Array
    markup: jax.Array
    leakage: jax.Array
    power_limit: jax.Array
    energy_flop: jax.Array
    energy_sram: jax.Array
    energy_hbm: jax.Array
    energy_link: jax.Array
    stack_bytes: jax.Array
    stack_bw: jax.Array
    stack_cost: jax.Array
    area_per_core: jax.Array = dataclasses.field(default_factory=lambda: jnp.float32(0.0))



_TECH_KEYS = ("name", "description", "compute_mm2_per_tflops", "flops_ratio", "sram_mm2_per_mb",
              "sram_bytes_per_flop", "hbm_phy_mm2", "link_mm2_per_100gbs", "fixed_mm2", "reticle_mm2",
              "max_hbm_stacks", "wafer_usd", "wafer_mm", "defects_per_cm2", "yield_alpha", "packaging_usd",
              "overhead_usd", "markup", "leakage_w_per_mm2", "power_limit_w", "energy", "hbm", "core_mm2")
_TECH_ENERGY_KEYS = ("pj_per_flop", "sram_pj_per_bit", "link_pj_per_bit")
_HBM_KEYS = ("stack_gb", "stack_tbs", "stack_usd", "pj_per_bit", "max_stacks")


def technology_from_dict(d: dict, hbm: str | None = None, src="technology") -> Technology:
    """Validate a technology spec (see specs/technology/n5.yaml) and build it.

    Args:
      hbm: name of the HBM generation under `hbm:` (default: the first).
    """
    check_keys(src, "", d, _TECH_KEYS, required=[k for k in _TECH_KEYS if k not in ("name", "description", "core_mm2")])
    num = lambda k, **kw: number(src, k, d[k], **kw)  # noqa: E731
    ratio = d["flops_ratio"]
    if not isinstance(ratio, dict) or "bf16" not in ratio:
        raise SpecError(f"{src}: flops_ratio must map dtypes to their peak relative to bf16, with bf16: 1")
    unknown = [k for k in ratio if k not in DTYPES]
    if unknown:
        raise SpecError(f"{src}: flops_ratio has unknown dtype {unknown[0]!r}; allowed: {', '.join(DTYPES)}")
    en = d["energy"]
    if not isinstance(en, dict):
        raise SpecError(f"{src}: energy must be a mapping with keys {', '.join(_TECH_ENERGY_KEYS)}")
    check_keys(src, "energy.", en, _TECH_ENERGY_KEYS, required=_TECH_ENERGY_KEYS)
    pj = en["pj_per_flop"]
    if not isinstance(pj, dict) or "bf16" not in pj:
        raise SpecError(f"{src}: energy.pj_per_flop must map dtypes to pJ per FLOP, with bf16")
    gens = d["hbm"]
    if not isinstance(gens, dict) or not gens:
        raise SpecError(f"{src}: hbm must map generation names to {', '.join(_HBM_KEYS)}")
    name = choice(f"{src}: HBM generation", hbm or next(iter(gens)), tuple(gens))
    g = gens[name]
    check_keys(src, f"hbm.{name}.", g, _HBM_KEYS, required=_HBM_KEYS[:4])
    gnum = lambda k: number(src, f"hbm.{name}.{k}", g[k])  # noqa: E731
    max_stacks = min(num("max_hbm_stacks"), gnum("max_stacks") if "max_stacks" in g else math.inf)
    return as_f32(
        Technology,
        area_per_flops=num("compute_mm2_per_tflops") / 1e12,
        flops_ratio=np.array([float(ratio.get(dt, ratio.get("bf16"))) for dt in DTYPES]),
        area_per_sram_byte=num("sram_mm2_per_mb") / 1e6, sram_bw_per_flops=num("sram_bytes_per_flop"),
        area_hbm_phy=num("hbm_phy_mm2"), area_per_link_bw=num("link_mm2_per_100gbs") / 100e9,
        area_fixed=num("fixed_mm2", allow_zero=True), reticle=num("reticle_mm2"), max_stacks=max_stacks,
        wafer_cost=num("wafer_usd"), wafer_diameter=num("wafer_mm"),
        defect_density=num("defects_per_cm2", allow_zero=True) / 100.0, yield_alpha=num("yield_alpha"),
        packaging_cost=num("packaging_usd", allow_zero=True), overhead_cost=num("overhead_usd", allow_zero=True),
        markup=num("markup"), leakage=num("leakage_w_per_mm2", allow_zero=True), power_limit=num("power_limit_w"),
        energy_flop=np.array([number(src, "energy.pj_per_flop", pj.get(dt, pj["bf16"])) * 1e-12 for dt in DTYPES]),
        energy_sram=number(src, "energy.sram_pj_per_bit", en["sram_pj_per_bit"]) * 8e-12,
        energy_hbm=gnum("pj_per_bit") * 8e-12, energy_link=number(src, "energy.link_pj_per_bit",
                                                                    en["link_pj_per_bit"]) * 8e-12,
        # DRAM dies are binary (24 Gbit = 24 x 2^30 bits), so a "36 GB" stack holds 36 GiB
        stack_bytes=gnum("stack_gb") * 2.0**30, stack_bw=gnum("stack_tbs") * 1e12, stack_cost=gnum("stack_usd"),
        area_per_core=number(src, "core_mm2", d.get("core_mm2", 0.0), allow_zero=True))


def load_technology(name_or_path, hbm: str | None = None) -> Technology:
    """Load a technology by name (e.g. 'n5', from specs/technology) or a YAML path."""
    p = Path(str(name_or_path))
    if not (p.suffix in (".yaml", ".yml") or p.exists()):
        p = SPEC_ROOT / "technology" / f"{name_or_path}.yaml"
    if not p.is_file():
        names = sorted(q.stem for q in (SPEC_ROOT / "technology").glob("*.yaml"))
        raise SpecError(f"unknown technology {name_or_path!r}; built-in: {', '.join(names)}")
    return technology_from_dict(read_yaml(p), hbm=hbm, src=str(p))


