"""Questions answered by inverting or optimizing the cost model: co-design of
a chip by gradient (with a grid oracle), sensitivities (elasticities),
platform requirements (closed forms and root finds on `evaluate`).
Imports `jaxplat.cost`, `jaxplat.serving`, `jaxplat.search` and below.
"""

from jaxplat.design import codesign, requirements
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
)
from jaxplat.design.codesign_study import problem_from_dict
from jaxplat.design.requirements import closed_forms, invert, scale_chip
from jaxplat.design.requirements import requirements as platform_requirements

__all__ = ["OBJECTIVES", "PARAMS", "Problem", "Result", "Schedule", "candidate_validity", "codesign", "elasticities",
           "grid_search", "hardware_numbers", "optimize", "problem_from_dict", "closed_forms", "invert", "scale_chip",
           "platform_requirements", "requirements"]
