"""Energy, power and money at a serving operating point.

`evaluate` prices one static batch: its energy per token, average power and
cost per token go with its own throughput. A serving mode (offline max load,
a closed loop of N clients) reports another throughput, at another batch, so
its energy and cost must be priced at that point, not borrowed from the
static batch (a max-load throughput beside a batch-1 cost is ~70x off).

At an operating point with `batch` sequences decoding per replica and
`throughput` output tokens/s of the whole deployment:
  * dynamic energy per token (FLOPs, bytes moved, bytes sent) is that of the
    same work done at that batch: `evaluate`'s energy per token at `batch`
    less its static part (static power x replica chips x e2e, per token);
  * static energy per token = static power x chips / throughput (every chip
    leaks for as long as the tokens take at that throughput);
  * power = energy per token x throughput; cost per token from
    `cost.money.cost_per_mtok` (chip price over its lifetime, energy at a
    price and PUE: Barroso, Hölzle & Ranganathan, "The Datacenter as a
    Computer", 3rd ed., ch. 6).
"""

import jax
import jax.numpy as jnp

from jaxplat.cost import evaluate, money, safe_div
from jaxplat.model import Hardware, Model, Options, Parallel, Workload, pytree_dataclass, replace


@pytree_dataclass
class OperatingPoint:
    """Energy and money of a deployment at one serving operating point.

    energy_per_token_j: J per output token. power_w: average power of all
    chips (dp replicas), W. cost_per_mtok_usd: USD per 1e6 output tokens.
    throughput: the output tokens/s they are priced at.
    """

    energy_per_token_j: jax.Array
    power_w: jax.Array
    cost_per_mtok_usd: jax.Array
    throughput: jax.Array


def operating_point(model: Model, hw: Hardware, par: Parallel, wl: Workload, opts: Options, batch,
                    throughput) -> OperatingPoint:
    """Energy per token, power and cost per Mtok of serving `throughput`
    output tokens/s (all dp replicas) with `batch` sequences decoding per
    replica (module docstring). Traceable; `opts` static."""
    b = jnp.maximum(jnp.asarray(batch, jnp.float32), 1.0)
    m = evaluate(model, hw, par, replace(wl, batch=b), opts)
    replica_chips = safe_div(m.chips, par.dp)
    # energy.per_token's basis: the static power over the batch's e2e time, taken back out
    dynamic = m.energy_per_token_j - safe_div(hw.power.static_power * replica_chips * m.e2e, b * wl.output)
    per_token = dynamic + safe_div(hw.power.static_power * m.chips, throughput)
    power = per_token * throughput
    return OperatingPoint(energy_per_token_j=per_token, power_w=power,
                          cost_per_mtok_usd=money.cost_per_mtok(hw, m.chips, power, throughput),
                          throughput=jnp.asarray(throughput, jnp.float32))


__all__ = ["OperatingPoint", "operating_point"]
