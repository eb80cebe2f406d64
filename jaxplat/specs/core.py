"""Spec files on the host: reading YAML/JSON, validating numbers and keys
with one-line errors, finding built-in specs by name.

Model specs use Hugging Face `config.json` keys (extra keys are ignored: a
real config.json has dozens we do not use). Hardware and workload specs are
ours, so an unknown key there is a typo and an error that names it. The
pytrees built from specs live in `jaxplat.model` (`*_spec` modules).
"""

import copy
import difflib
import functools
import math
import os
import re
from pathlib import Path

import yaml

from jaxplat.specs.units import DTYPES, WEIGHT_DTYPES, WEIGHT_FORMATS

SPEC_ROOT = Path(os.environ.get("JAXPLAT_SPECS", Path(__file__).resolve().parents[2] / "specs"))
UNBOUNDED_SLO = 1e9  # s: an SLO that is never violated


class SpecError(ValueError):
    """A spec that cannot be used; the message is one line for the user."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads 80e9, 1e-6 and 3.35e12 as floats.

    PyYAML follows YAML 1.1, whose float needs a dot and a signed exponent.
    """


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d[\d_]*)?(?:\.\d*)?[eE][-+]?\d+$|^[-+]?(?:\d[\d_]*)\.\d*$|^[-+]?\.\d+$"
               r"|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
    list("-+0123456789."))


def read_text(path) -> str:
    """A spec file's text, or a one-line SpecError naming the file (missing,
    a directory, unreadable, not UTF-8 text)."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise SpecError(f"{path}: is a directory, not a spec file") from None
    except UnicodeDecodeError as e:
        raise SpecError(f"{path}: not a text file (byte {e.start} is not UTF-8); expected YAML or JSON") from None
    except OSError as e:
        raise SpecError(f"{path}: cannot read ({e.strerror or e})") from None


@functools.lru_cache(maxsize=512)
def _parse(text: str):
    # Parsed once per text: a calibration run loads the same chip files for each of its 1,290 rows,
    # and PyYAML's pure-Python parser is most of that time (read_yaml hands out copies).
    return yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader)


def read_yaml(path: Path) -> dict:
    """Parse a YAML (or JSON) file into a dict (the caller's own copy), or raise SpecError."""
    text = read_text(path)
    try:
        data = copy.deepcopy(_parse(text))
    except yaml.YAMLError as e:
        raise SpecError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping of keys at the top level")
    return data


def builtin_names(kind: str) -> list[str]:
    """Names of the built-in specs of a kind ('models', 'hardware', 'workloads')."""
    return sorted(p.stem for p in (SPEC_ROOT / kind).glob("*.yaml"))


def resolve(kind: str, name_or_path) -> Path:
    """A spec's path: `name_or_path` if it is a path (has a YAML/JSON suffix
    or exists), else the built-in `specs/<kind>/<name>.yaml`; SpecError
    otherwise (a directory, a missing file, an unknown name with close matches)."""
    singular = {"models": "model", "workloads": "workload", "studies": "study"}.get(kind, kind)
    p = Path(str(name_or_path))
    if p.suffix in (".yaml", ".yml", ".json") or p.exists():
        if p.is_dir():
            raise SpecError(f"{p}: is a directory, not a {singular} spec file")
        if not p.is_file():
            raise SpecError(f"{p}: {singular} spec file not found")
        return p
    builtin = SPEC_ROOT / kind / f"{name_or_path}.yaml"
    if builtin.is_file():
        return builtin
    names = builtin_names(kind)
    close = difflib.get_close_matches(str(name_or_path), names, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; built-in: {', '.join(names)}"
    raise SpecError(f"unknown {singular} {name_or_path!r}{hint}")


def spec_label(name_or_path) -> str:
    """How a spec named on the command line or in a study is shown: a
    built-in name as given; a file by its `name:` key, else its file name
    without the suffix (`/long/path/rag-long.yaml` -> rag-long)."""
    p = Path(str(name_or_path))
    if p.suffix not in (".yaml", ".yml", ".json") and not p.exists():
        return str(name_or_path)
    try:
        name = read_yaml(p).get("name")
    except SpecError:
        name = None
    return name if isinstance(name, str) and name else p.stem


def number(src, key, value, *, positive=True, allow_zero=False) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise SpecError(f"{src}: {key} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise SpecError(f"{src}: {key} must be a number, got {value!r}")
    if math.isinf(value):  # an infinite bandwidth, size or price prices nothing: a typo, not a chip
        raise SpecError(f"{src}: {key} must be a finite number, got {value!r}")
    if positive and (value < 0 or (value == 0 and not allow_zero)):
        raise SpecError(f"{src}: {key} must be {'non-negative' if allow_zero else 'positive'}, got {value}")
    return float(value)


def integer(src, key, value, *, minimum=1) -> int:
    """A whole number >= `minimum` (YAML `8`, `8.0` or "8"), or a one-line SpecError naming the key."""
    x = value
    if isinstance(x, str):
        try:
            x = float(x)
        except ValueError:
            raise SpecError(f"{src}: {key} must be a whole number, got {value!r}") from None
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x != int(x):
        raise SpecError(f"{src}: {key} must be a whole number, got {value!r}")
    if x < minimum:
        raise SpecError(f"{src}: {key} must be at least {minimum}, got {value!r}")
    return int(x)


def choice(where, value, allowed):
    """`value` if it is one of `allowed` (a name such as a schedule or a
    mode), else a one-line SpecError naming `where` (a flag, `--sp`, or a
    spec's key, `file.yaml: options.sp`) and what it may be."""
    try:
        known = value in allowed
    except TypeError:  # an unhashable value (a YAML list or mapping) against a dict's keys
        known = False
    if not known:
        names = {str(a).lower(): str(a) for a in allowed}
        close = difflib.get_close_matches(str(value).lower(), list(names), n=1)
        close = [names[c] for c in close]
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise SpecError(f"{where} {value!r} is not one of {', '.join(map(str, allowed))}{hint}")
    return value


def check_keys(src, where, data: dict, allowed, required=()):
    if not isinstance(data, dict):
        raise SpecError(f"{src}: {where.rstrip('.') or 'the spec'} must be a mapping with keys {', '.join(allowed)}, "
                        f"got {data!r:.40}")
    for k in data:
        if k not in allowed:
            close = difflib.get_close_matches(k, allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SpecError(f"{src}: unknown key {where}{k!r}{hint}; allowed: {', '.join(allowed)}")
    for k in required:
        if k not in data:
            raise SpecError(f"{src}: missing key {where}{k!r}")


def dtype_name(src, key, value, weights=False) -> str:
    """A dtype name, checked; `weights=True` also takes a weight storage
    format (units.WEIGHT_FORMATS, e.g. 'mxfp4')."""
    allowed = WEIGHT_DTYPES if weights else DTYPES
    if value not in allowed:
        raise SpecError(f"{src}: {key} has unknown dtype {value!r}; allowed: {', '.join(allowed)}")
    return value


def dtype_triple(where, text) -> dict:
    """One dtype ('fp8') or weights/activations/kv ('fp4/fp4/fp8': NVFP4
    weights and activations, FP8 KV cache; 'mxfp4/bf16/bf16': MXFP4 weights
    with 16-bit GEMMs), optionally /experts, the routed experts' weights when
    they differ ('bf16/bf16/bf16/mxfp4': gpt-oss) -> {weights, activations,
    kv[, experts]}."""
    parts = [p.strip() for p in str(text).split("/")]
    if len(parts) == 1:
        parts = parts * 3
    weights = [parts[0]] + parts[3:]
    if len(parts) not in (3, 4) or any(p not in WEIGHT_DTYPES for p in weights) or any(
            p not in DTYPES for p in parts[1:3]):
        raise SpecError(f"{where}: {text!r} is not a dtype or weights/activations/kv[/experts] of "
                        f"{', '.join(DTYPES)} (weights and experts also {', '.join(WEIGHT_FORMATS)})")
    return dict(zip(("weights", "activations", "kv", "experts"), parts))


