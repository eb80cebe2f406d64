"""jaxplat: a JAX-native, differentiable cost model of LLM inference.

The public API, re-exported from the packages (layers, lowest first):
`specs` (spec files, units) -> `model` (pytrees) -> `cost` (the one cost
model) -> `serving` -> `search` -> `design` -> `cli`, `report`.
"""

from jaxplat.cost import Metrics, breakdown, evaluate
from jaxplat.model import (
                           Hardware,
                           Model,
                           Options,
                           Parallel,
                           Technology,
                           Workload,
                           load_hardware,
                           load_model,
                           load_technology,
                           load_workload,
                           replace,
)
from jaxplat.specs import SpecError

__version__ = "0.2.0"

__all__ = ["Hardware", "Metrics", "Model", "Options", "Parallel", "SpecError", "Technology", "Workload",
           "__version__", "breakdown", "evaluate", "load_hardware", "load_model", "load_technology",
           "load_workload", "replace"]
