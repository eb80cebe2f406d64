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

# The public names (documented, kept stable). The other names imported above serve
# this project's own modules and older scripts; new code imports them from their module.
__all__ = ["Problem", "Result", "Schedule", "closed_forms", "codesign", "elasticities", "grid_search", "invert",
           "optimize", "platform_requirements", "problem_from_dict", "requirements"]
