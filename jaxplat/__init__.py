"""jaxplat: a JAX-native, differentiable cost model of LLM inference."""

from jaxplat.breakdown import breakdown
from jaxplat.hardware import Hardware
from jaxplat.inference import Metrics, evaluate
from jaxplat.model import Model
from jaxplat.options import Options
from jaxplat.parallel import Parallel
from jaxplat.specs import SpecError, load_hardware, load_model, load_workload
from jaxplat.workload import Workload

__all__ = [
    "Hardware", "Metrics", "Model", "Options", "Parallel", "SpecError", "Workload",
    "breakdown", "evaluate", "load_hardware", "load_model", "load_workload",
]
