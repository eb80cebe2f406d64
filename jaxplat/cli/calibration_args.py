"""`--calibration FILE --engine NAME`: the options `estimate`, `sweep` and
`codesign` share to choose the efficiency parameters they run with."""


def add_calibration_arguments(p):
    p.add_argument("--calibration", help="efficiency parameters from `jaxplat calibrate --out FILE` "
                                         "(default: the shipped specs/calibration/default.yaml)")
    p.add_argument("--engine", help="a serving engine the calibration has its own values for (its engines: "
                                    "e.g. vllm-0.7, or parts joined by +: vllm-0.7+rocm); default: the reference "
                                    "engine of its global values")
