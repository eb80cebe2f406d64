"""`--calibration FILE --engine NAME`: the options `estimate`, `sweep` and
`codesign` share to choose the efficiency parameters they run with."""


def add_calibration_arguments(p):
    p.add_argument("--calibration", help="efficiency parameters from `jaxplat calibrate --out FILE` "
                                         "(default: the shipped specs/calibration/default.yaml)")
    p.add_argument("--engine", help="the software stack the chip runs: a spec of specs/software (graph-captured, "
                                    "the default; dataflow, the default of a dataflow chip; fitted-2026-12, the fixed "
                                    "costs fitted with the shipped calibration) or a YAML file; or a serving engine "
                                    "the calibration has its own values for (e.g. anl-vllm, parts joined by +: "
                                    "anl-vllm+rocm), run on the stack that calibration was fitted with")
