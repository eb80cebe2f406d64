"""Test / validation / fit split of a measured CSV, declared in a YAML file
(data/measured/inference_split.yaml) before any prediction is compared with
the rows.

A row's key is "source | model | chip | engine | chips | tp | isl | osl |
batch | metric" (the CSV's columns, batch = concurrency_or_batch), with
" #n" appended (n = 1, 2, ... in file order) where the CSV repeats a
measurement under one key. The YAML holds:
  default   the role of a row no rule names (fit, validation or test)
  rules     list of {split, why, where: {column: value | [values]},
            contains: {column: substring}}; the first rule that matches a
            row decides its role; a rule matching no row is an error
  rows      {role: [key, ...]}: single rows, overriding the rules; a key
            the data does not have is an error
Bad input is a one-line SpecError naming the file and the rule or row.
"""

import csv
from collections import Counter
from pathlib import Path

from jaxplat.specs import SpecError, read_yaml

ROLES = ("fit", "validation", "test")
KEY_COLUMNS = ("source", "model", "chip", "engine", "chips", "tp", "isl", "osl", "concurrency_or_batch", "metric")
INFERENCE_CSV = Path(__file__).resolve().parents[2] / "data/measured/inference_2026-12.csv"
INFERENCE_SPLIT = INFERENCE_CSV.with_name("inference_split.yaml")


def read_csv_rows(path) -> list[dict]:
    """The CSV's rows as dicts of strings (file order)."""
    try:
        with open(path, newline="") as fh:
            return list(csv.DictReader(fh))
    except OSError as err:
        raise SpecError(f"{path}: cannot read ({err.strerror})") from None


def row_keys(rows) -> list[str]:
    """Stable key of every row (module docstring), " #n" on repeats."""
    base = [" | ".join((r.get(c) or "").strip() for c in KEY_COLUMNS) for r in rows]
    total, seen, keys = Counter(base), Counter(), []
    for k in base:
        seen[k] += 1
        keys.append(k if total[k] == 1 else f"{k} #{seen[k]}")
    return keys


def _role(src, where, role):
    if role not in ROLES:
        raise SpecError(f"{src}: {where}: split {role!r} unknown (allowed: {', '.join(ROLES)})")
    return role


def _matches(row, rule) -> bool:
    for col, want in (rule.get("where") or {}).items():
        allowed = [str(w) for w in want] if isinstance(want, list) else [str(want)]
        if (row.get(col) or "").strip() not in allowed:
            return False
    return all(str(sub) in (row.get(col) or "") for col, sub in (rule.get("contains") or {}).items())


def _check_rule(src, i, rule, columns):
    where = f"rules[{i}]"
    if not isinstance(rule, dict) or not (rule.get("where") or rule.get("contains")):
        raise SpecError(f"{src}: {where}: needs a mapping with 'where' and/or 'contains'")
    for block in ("where", "contains"):
        for col in rule.get(block) or {}:
            if col not in columns:
                raise SpecError(f"{src}: {where}.{block}: column {col!r} not in the data "
                                f"(allowed: {', '.join(columns)})")
    return _role(src, where, rule.get("split"))


def assign_split(rows, spec, src="split") -> list[str]:
    """The role ('fit' | 'validation' | 'test') of every row, by the split
    mapping `spec` (module docstring); `src` names the file in errors."""
    if not isinstance(spec, dict):
        raise SpecError(f"{src}: top level must be a mapping with default, rules, rows")
    columns = list(rows[0]) if rows else list(KEY_COLUMNS)
    default = _role(src, "default", spec.get("default", "fit"))
    roles = [None] * len(rows)
    for i, rule in enumerate(spec.get("rules") or []):
        role = _check_rule(src, i, rule, columns)
        hit = [j for j, r in enumerate(rows) if _matches(r, rule)]
        if not hit:
            raise SpecError(f"{src}: rules[{i}] ({rule.get('why', '')}) matches no row of the data")
        for j in hit:
            roles[j] = roles[j] or role
    index = {k: j for j, k in enumerate(row_keys(rows))}
    for role, keys in (spec.get("rows") or {}).items():
        _role(src, f"rows.{role}", role)
        for key in keys or []:
            if key not in index:
                raise SpecError(f"{src}: rows.{role}: row {key!r} is not in the data")
            roles[index[key]] = role
    return [r or default for r in roles]


def load_inference_split(split_path=INFERENCE_SPLIT, csv_path=INFERENCE_CSV):
    """(rows, roles): the measured CSV's rows (dicts, file order) and the
    role of each, from the split YAML."""
    rows = read_csv_rows(csv_path)
    return rows, assign_split(rows, read_yaml(split_path), src=str(split_path))
