"""The one cost model: the operator table (attention kinds, MoE, Mamba), roofline,
collectives on a network hierarchy, memory placement and tiling, energy,
money, `evaluate` -> `Metrics`, and the per-operator breakdown (the same
arrays `evaluate` reduces). Imports `jaxplat.model` and below.
"""

from jaxplat.cost import efficiency
from jaxplat.cost.efficiency import gemm_peak, iteration_overhead, quantization, row_rates
from jaxplat.cost.inference import (
                                    DEFAULT_SHARPNESS,
                                    Metrics,
                                    Phases,
                                    attention_split,
                                    context_ok,
                                    divisibility,
                                    evaluate,
                                    operator_tables,
                                    peak_flops,
                                    phases,
                                    row_components,
                                    state_bytes,
)
from jaxplat.cost.memory import kv_read_mask
from jaxplat.cost.money import chip_numbers, priced_chip
from jaxplat.cost.operators import OpKind, OpTable, build_table
from jaxplat.cost.per_operator import breakdown, breakdown_rows, comm_arrays, comm_breakdown, comm_rows, operator_arrays
from jaxplat.cost.roofline import safe_div
from jaxplat.cost.stages import microbatching

# The public names (documented, kept stable). The other names imported above serve
# this project's own modules and older scripts; new code imports them from their module.
__all__ = ["Metrics", "OpKind", "OpTable", "breakdown", "build_table", "evaluate", "operator_tables"]
