"""The pytrees of one configuration: `Model`, `Hardware`, `Parallel`,
`Workload`, the static `Options`, the `Technology` of a chip, and their
loaders from spec files. Imports only `jaxplat.specs`.

`PROFILES`: the accounting conventions `Options(profile=...)` takes
("default", "genz").
"""

from jaxplat.model.architecture import (
                                        ATTENTION_KINDS,
                                        SSM_KINDS,
                                        Model,
                                        attention_layers,
                                        ffn_factor,
                                        ffn_layers,
                                        kv_elements_per_token,
                                        local_keys,
                                        local_pairs,
                                        local_tokens,
                                        moe_layers,
                                        param_count,
                                        ssm_conv_channels,
                                        ssm_in_width,
                                        ssm_params,
                                        ssm_state_elements,
)
from jaxplat.model.compute_spec import OFFLOAD_GROUPS, OFFLOAD_NAMES
from jaxplat.model.efficiency_spec import PARAMS as EFFICIENCY_PARAMS
from jaxplat.model.efficiency_spec import (
    Calibration,
    calibration_from_dict,
    default_calibration,
    engine_parts,
    load_calibration,
    select_calibration,
    select_engine,
)
from jaxplat.model.genz import GENZ_GB, genz_h100, genz_system
from jaxplat.model.hardware import MAX_MEM_LEVELS, MAX_NET_LEVELS, TOPOLOGIES, Hardware
from jaxplat.model.hardware_spec import (
    chip_software,
    chip_software_stack,
    hardware_from_dict,
    load_hardware,
    network_level_names,
)
from jaxplat.model.model_spec import checkpoint_dtype, load_checkpoint_dtype, load_model, model_from_config
from jaxplat.model.options import CONVENTIONS, PROFILES, Conventions, Options
from jaxplat.model.parallel import Parallel, chips, stage_chips
from jaxplat.model.pytree import as_f32, get, pytree_dataclass, replace, static
from jaxplat.model.software_spec import SOFTWARE_KEYS, Software, is_software, load_software, software_from_dict
from jaxplat.model.technology import Technology, load_technology, technology_from_dict
from jaxplat.model.workload import Workload
from jaxplat.model.workload_spec import dtype_fields, load_workload, workload_from_dict

# The public names (documented, kept stable). The other names imported above serve
# this project's own modules and older scripts; new code imports them from their module.
__all__ = ["PROFILES", "Calibration", "Hardware", "Model", "Options", "Parallel", "Software", "Technology", "Workload",
           "calibration_from_dict", "checkpoint_dtype", "default_calibration", "hardware_from_dict",
           "load_calibration", "load_hardware", "load_model", "load_software", "load_technology", "load_workload",
           "model_from_config", "param_count", "replace", "software_from_dict", "technology_from_dict",
           "workload_from_dict"]
