"""Plain-text tables and summaries with units (the numbers come from the model)."""

import json
import math

from jaxplat.specs.units import fmt_bytes, fmt_time


def finite_or_none(obj):
    """`obj` (dicts, lists, tuples of numbers, strings, bools, None) with every
    non-finite float (NaN, +-inf) replaced by None and numpy scalars and
    arrays made plain Python."""
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_none(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (bool, int, float, str)):  # numpy scalar or array
        return finite_or_none(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def json_text(obj, **kwargs) -> str:
    """Strict JSON of `obj`: NaN and infinities (which have no JSON literal;
    json.dumps would write bare NaN / Infinity, refused by strict parsers)
    become null. Keyword arguments go to json.dumps."""
    return json.dumps(finite_or_none(obj), allow_nan=False, **kwargs)


def table(headers: list[str], rows: list[list], align: str | None = None) -> str:
    """Format rows as a fixed-width text table; `align` is 'l'/'r' per column."""
    cells = [[str(c) for c in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    align = align or "l" + "r" * (len(headers) - 1)
    def line(r):
        return "  ".join(c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(r, widths, align))
    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])


def _num(x: float, unit: str = "") -> str:
    if x == 0:
        return "0"
    return f"{x:.4g}{unit}"


def operator_table(bd: dict, title: str) -> str:
    """The per-operator breakdown (see `jaxplat.breakdown`) as text."""
    rows = []
    total = sum(bd["total_time"]) or 1.0
    for i, name in enumerate(bd["name"]):
        if bd["count"][i] == 0 or bd["total_time"][i] == 0 and bd["flops"][i] == 0 and bd["bytes_w"][i] == 0:
            continue
        rows.append([
            name, f"{bd['count'][i]:g}", _num(bd["flops"][i] / 1e9), fmt_bytes(bd["bytes_a"][i] + bd["bytes_o"][i]),
            fmt_bytes(bd["bytes_w"][i]), fmt_time(bd["compute_time"][i]), fmt_time(bd["memory_time"][i]),
            fmt_time(bd.get("fixed_time", [0.0] * len(bd["name"]))[i]), fmt_time(bd["comm_time"][i]),
            fmt_time(bd["total_time"][i]), f"{100 * bd['total_time'][i] / total:.1f}%", bd["bound"][i]])
    headers = ["operator", "count", "GFLOP", "act bytes", "weight/KV", "compute", "memory", "fixed", "comm",
               "total", "share", "bound"]
    return f"{title}\n" + table(headers, rows, "lrrrrrrrrrrl")


def format_comm_breakdown(rows: list[dict], level_names=None) -> str:
    """`comm_breakdown` rows as a text table: one line per collective row and
    phase, with the seconds of one call at each network level, the fastest
    algorithm per level, and the total per pass (calls x one call)."""
    if not rows:
        return "Communication: none (every group is one chip)"
    nlev = max(len(r["level_seconds"]) for r in rows)
    used = [i for i in range(nlev) if any(r["level_seconds"][i] for r in rows)] or [0]
    names = list(level_names or []) + [f"level {i}" for i in range(len(level_names or []), nlev)]
    out = []
    for r in rows:
        lv = [f"{fmt_time(r['level_seconds'][i])} {r['algorithms'][i]}".strip() if r["level_seconds"][i] else "-"
              for i in used]
        out.append([r["phase"], r["name"], r["kind"], f"{r['group']:g}", fmt_bytes(r["payload_bytes"]),
                    f"{r['calls']:g}", *lv, fmt_time(r["seconds"]), fmt_time(r["total_seconds"])])
    headers = ["phase", "collective", "kind", "chips", "payload", "calls",
               *[names[i] for i in used], "per call", "per pass"]
    return "Communication per collective and network level\n" + table(headers, out, "lllrrr" + "r" * (len(used) + 2))
