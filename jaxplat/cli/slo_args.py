"""`--ttft SECONDS` / `--tpot SECONDS`: SLOs given on the command line
(`requirements`: instead of the workload's; `sweep`: instead of the study's
constraints), so a new SLO needs no workload or study file."""

import math

from jaxplat.specs import SpecError

KEYS = ("ttft", "tpot")
_WHAT = {"ttft": "time to first token", "tpot": "time per output token"}


def add_slo_arguments(p, instead_of: str) -> None:
    """Add --ttft and --tpot to parser `p`; `instead_of` names what they override."""
    for key in KEYS:
        p.add_argument(f"--{key}", metavar="SECONDS",
                       help=f"{key.upper()} SLO ({_WHAT[key]}) in seconds, or 'none' for no limit; "
                            f"overrides {instead_of}")


def slo_flags(args) -> dict:
    """{'ttft': seconds or None (no limit), ...} for the flags given; a
    one-line SpecError naming the flag for anything but a positive number
    or 'none'."""
    out = {}
    for key in KEYS:
        text = getattr(args, key, None)
        if text is None:
            continue
        if str(text).strip().lower() == "none":
            out[key] = None
            continue
        try:
            v = float(text)
        except ValueError:
            v = math.nan
        if not (math.isfinite(v) and v > 0):
            raise SpecError(f"--{key} must be positive seconds (e.g. 0.5) or 'none', got {text!r}")
        out[key] = v
    return out
