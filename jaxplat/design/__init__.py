"""Questions answered by inverting or optimizing the cost model: co-design of
a chip by gradient (with a grid oracle), sensitivities (elasticities).
Imports `jaxplat.cost`, `jaxplat.serving`, `jaxplat.search` and below.
"""

from jaxplat.design import codesign
from jaxplat.design.codesign import (
                                     OBJECTIVES,
                                     PARAMS,
                                     Problem,
                                     Result,
                                     Schedule,
                                     candidate_validity,
                                     elasticities,
                                     grid_search,
                                     hardware_numbers,
                                     optimize,
                                     problem_from_dict,
)

__all__ = ["OBJECTIVES", "PARAMS", "Problem", "Result", "Schedule", "candidate_validity", "codesign", "elasticities",
           "grid_search", "hardware_numbers", "optimize", "problem_from_dict"]
