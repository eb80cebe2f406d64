"""Spec files -> validated plain values: YAML reading, one-line errors, units.

The lowest layer: imports nothing else of jaxplat.

`SPEC_ROOT`: the folder of the built-in specs (models, hardware, workloads,
studies; $JAXPLAT_SPECS moves it). `UNBOUNDED_SLO`: the seconds of an SLO
that is never violated (a workload without one). `units`: SI conversions.
"""

from jaxplat.specs import units
from jaxplat.specs.core import (
                                SPEC_ROOT,
                                UNBOUNDED_SLO,
                                SpecError,
                                builtin_names,
                                check_keys,
                                choice,
                                dtype_name,
                                dtype_triple,
                                integer,
                                number,
                                read_text,
                                read_yaml,
                                resolve,
                                spec_label,
)

# The public names (documented, kept stable). The other names imported above serve
# this project's own modules and older scripts; new code imports them from their module.
__all__ = ["SPEC_ROOT", "UNBOUNDED_SLO", "SpecError", "builtin_names", "read_yaml", "resolve", "spec_label", "units"]
