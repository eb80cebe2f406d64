"""jaxplat: a JAX-native, differentiable cost model of LLM inference.

The public API: the names in `__all__` here (load specs, `evaluate` one
configuration, `replace` a number, read the `breakdown`), the command line
`jaxplat.cli.main(argv)`, and the `__all__` of the documented modules:
`jaxplat.specs`, `jaxplat.model`, `jaxplat.cost`, `jaxplat.cost.microarch`,
`jaxplat.serving`, `jaxplat.search`, `jaxplat.design`, `jaxplat.report`,
`jaxplat.cli` (tests/test_public_api.py holds them to it). Other names are
the project's own and may change. The packages are layers, lowest first:
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
