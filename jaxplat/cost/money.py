"""Money: cost per million tokens (TCO), and a technology model of a chip.

Cost per token = (capex amortized over the lifetime + facility energy at a
price) / tokens, the usual accelerator TCO split (Barroso, Hölzle &
Ranganathan, "The Datacenter as a Computer", 3rd ed., ch. 6).

The technology model prices a hypothetical chip from its numbers: die area
from compute, SRAM and I/O; dies per wafer and a negative-binomial yield give
the die cost; HBM stacks, packaging and overheads are added. The same model
gives the chip's TDP (leakage per mm² plus each unit at full rate) for a
power limit. Constants live in `specs/technology/*.yaml` with sources.
"""

import math

import jax
import jax.numpy as jnp

from jaxplat.cost.roofline import safe_div
from jaxplat.model import Hardware, Technology, replace
from jaxplat.specs.units import DTYPES


def capex_per_s(hw: Hardware, chips) -> jax.Array:
    """USD per second of the deployment's hardware: chips x price / lifetime."""
    return safe_div(chips * hw.cost.price, hw.cost.lifetime)


def energy_cost_per_s(hw: Hardware, power_w) -> jax.Array:
    """USD per second of facility energy: IT power x PUE x price per J."""
    return power_w * hw.cost.pue * hw.cost.energy_price


def cost_per_mtok(hw: Hardware, chips, power_w, throughput) -> jax.Array:
    """USD per million output tokens at a steady `throughput` (tokens/s).

    Args:
      hw: uses price (USD/chip), lifetime (s), pue, energy_price (USD/J).
      chips: chips of the deployment. power_w: its average power, W.
      throughput: its output tokens per second.
    Returns:
      Scalar USD per 1e6 tokens (0 when throughput is 0).
    """
    return 1e6 * safe_div(capex_per_s(hw, chips) + energy_cost_per_s(hw, power_w), throughput)


def die_area(tech: Technology, flops, sram_bytes, stacks, link_bw) -> jax.Array:
    """Die area in mm² of a chip with these numbers (bf16 FLOP/s, bytes,
    HBM stacks, scale-up bytes/s per direction)."""
    return (tech.area_fixed + flops * tech.area_per_flops + sram_bytes * tech.area_per_sram_byte
            + stacks * tech.area_hbm_phy + link_bw * tech.area_per_link_bw)


def dies_per_wafer(tech: Technology, area) -> jax.Array:
    """Gross dies per wafer: π r²/A - π d/√(2A) (edge loss; Hennessy &
    Patterson, Computer Architecture, 6th ed., Sec. 1.6). At least 1e-3 so
    that cost stays finite for absurd areas (which the reticle limit rejects)."""
    d = tech.wafer_diameter
    return jnp.maximum(math.pi * (d / 2.0) ** 2 / area - math.pi * d / jnp.sqrt(2.0 * area), 1e-3)


def die_yield(tech: Technology, area) -> jax.Array:
    """Negative-binomial die yield (1 + A·D0/α)^-α (Stapper, IBM J. R&D 1983)."""
    return (1.0 + area * tech.defect_density / tech.yield_alpha) ** (-tech.yield_alpha)


def chip_price(tech: Technology, area, stacks) -> jax.Array:
    """USD per chip: markup x (good die + HBM + packaging) + overheads."""
    die = tech.wafer_cost / (dies_per_wafer(tech, area) * die_yield(tech, area))
    return tech.markup * (die + stacks * tech.stack_cost + tech.packaging_cost) + tech.overhead_cost


def chip_tdp(tech: Technology, area, flops, stacks, link_bw) -> jax.Array:
    """W per chip at full rate: leakage + compute + SRAM + HBM + links (both directions)."""
    return (tech.leakage * area + flops * tech.energy_flop[DTYPES.index("bf16")]
            + flops * tech.sram_bw_per_flops * tech.energy_sram
            + stacks * tech.stack_bw * tech.energy_hbm + 2.0 * link_bw * tech.energy_link)



def chip_numbers(tech: Technology, flops, sram_bytes, stacks, link_bw, cores=0.0):
    """(die area mm², TDP W, price USD) of a chip with these numbers (bf16
    FLOP/s, SRAM bytes, HBM stacks, scale-up bytes/s per direction): the one
    pricing of hypothetical chips, for co-design and sweeps alike. `cores`:
    compute cores that each add Technology.area_per_core (0: none counted)."""
    area = die_area(tech, flops, sram_bytes, stacks, link_bw) + cores * tech.area_per_core
    return area, chip_tdp(tech, area, flops, stacks, link_bw), chip_price(tech, area, stacks)


def hbm_stacks(tech: Technology, mem_bytes, mem_bw) -> jax.Array:
    """Whole HBM stacks a chip needs for both its main-memory size and bandwidth."""
    return jnp.maximum(jnp.ceil(safe_div(mem_bytes, tech.stack_bytes)), jnp.ceil(safe_div(mem_bw, tech.stack_bw)))


def priced_chip(hw: Hardware, tech: Technology) -> Hardware:
    """`hw` with its price, TDP, static power and energies per operation
    from the technology model of its own numbers (bf16 peak, or its arrays'
    peak and cores; SRAM, HBM stacks for its level-0 size and bandwidth,
    scale-up link), not from its spec, as co-design prices a design
    (design.codesign.chip_hardware): the TDP is the draw at full rate of
    those energies, so a chip priced so is never held below its rated clock
    by its own TDP (energy.clock_share)."""
    flops = hw.chip.flops[DTYPES.index("bf16")]
    cores = 0.0
    if hw.chip.dataflow:  # systolic arrays: their peak and their cores' own area (a `compute:` block)
        flops = 2.0 * hw.chip.array_rows * hw.chip.array_cols * hw.chip.cores * hw.chip.clock_hz
        cores = hw.chip.cores
    stacks = hbm_stacks(tech, hw.memory.size[0], hw.memory.bandwidth[0])
    area, tdp, price = chip_numbers(tech, flops, hw.memory.sram_size, stacks, hw.network.bandwidth[0], cores)
    return replace(hw, price=price, **technology_power(hw, tech, area, tdp))


def technology_power(hw: Hardware, tech: Technology, area, tdp) -> dict:
    """`replace` fields of the power of a chip made in `tech` (its die area
    in mm² and TDP in W, from `chip_numbers`): the TDP, static power
    (leakage x area) and the technology's J per FLOP, per SRAM byte, per
    main-memory (HBM) byte and per scale-up byte, `hw`'s other levels kept."""
    return dict(tdp=tdp, static_power=tech.leakage * area, energy_flop=tech.energy_flop,
                energy_sram=tech.energy_sram, energy_mem=hw.power.energy_mem.at[0].set(tech.energy_hbm),
                energy_net=hw.power.energy_net.at[0].set(tech.energy_link))
