"""The pytrees of one configuration: `Model`, `Hardware`, `Parallel`,
`Workload`, the static `Options`, the `Technology` of a chip, and their
loaders from spec files. Imports only `jaxplat.specs`.
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
from jaxplat.model.pytree import as_f32, pytree_dataclass, replace, static
from jaxplat.model.software_spec import SOFTWARE_KEYS, Software, is_software, load_software, software_from_dict
from jaxplat.model.technology import Technology, load_technology, technology_from_dict
from jaxplat.model.workload import Workload
from jaxplat.model.workload_spec import dtype_fields, load_workload, workload_from_dict

__all__ = ["ATTENTION_KINDS", "SSM_KINDS", "attention_layers", "ffn_layers", "ssm_conv_channels", "ssm_in_width",
           "checkpoint_dtype", "load_checkpoint_dtype", "ssm_params", "ssm_state_elements", "CONVENTIONS",
           "EFFICIENCY_PARAMS", "Calibration", "Conventions", "GENZ_GB", "MAX_MEM_LEVELS", "MAX_NET_LEVELS",
           "OFFLOAD_GROUPS", "OFFLOAD_NAMES", "PROFILES", "TOPOLOGIES", "Hardware", "Model", "Options", "Parallel",
           "Technology", "Workload", "as_f32", "calibration_from_dict", "chip_software", "chips",
           "default_calibration", "ffn_factor", "genz_h100", "genz_system", "hardware_from_dict",
           "kv_elements_per_token", "load_calibration", "load_hardware", "load_model", "select_calibration", "select_engine",
           "engine_parts", "load_technology", "load_workload", "local_keys", "local_pairs", "local_tokens",
           "model_from_config", "moe_layers", "network_level_names", "param_count", "pytree_dataclass", "replace",
           "stage_chips", "static", "technology_from_dict", "workload_from_dict", "dtype_fields",
           "SOFTWARE_KEYS", "Software", "chip_software_stack", "is_software", "load_software",
           "software_from_dict"]
