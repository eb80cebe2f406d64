"""Spec files -> validated plain values: YAML reading, one-line errors, units.

The lowest layer: imports nothing else of jaxplat.
"""

from jaxplat.specs import units
from jaxplat.specs.core import (
                                SPEC_ROOT,
                                UNBOUNDED_SLO,
                                SpecError,
                                builtin_names,
                                check_keys,
                                dtype_name,
                                dtype_triple,
                                integer,
                                number,
                                read_text,
                                read_yaml,
                                resolve,
                                spec_label,
)

__all__ = ["SPEC_ROOT", "UNBOUNDED_SLO", "SpecError", "builtin_names", "check_keys", "dtype_name", "dtype_triple",
           "integer", "number", "read_text", "read_yaml", "resolve", "spec_label",
           "units"]
