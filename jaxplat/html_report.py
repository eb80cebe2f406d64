"""`jaxplat report OUT_DIR`: one self-contained HTML page of a sweep's or a
co-design's output folder.

The page reads the files `jaxplat sweep` writes (summary.json, top_k.csv,
pareto.csv, axes.csv, histogram.csv) or those `jaxplat codesign` writes
(summary.json, trajectory.csv, sensitivities.csv). Figures are plotly with its
JavaScript embedded in the page, so it opens offline by double-click; every
number carries its unit and tables have readable headers. A folder that is
neither gives a `SpecError` (one line), never a traceback.
"""

import datetime
import html
import json
import math
from pathlib import Path

import numpy as np

from jaxplat.specs import SpecError

REPORT_FILE = "report.html"

# ------------------------------------------------------------ names, units

# column (or axis, or summary key) -> (readable name, unit shown, SI value per shown unit)
COLUMNS = {
    # metrics, as the sweep's tables name them (SI suffix in the key)
    "ttft_s": ("TTFT", "ms", 1e-3),
    "tpot_s": ("TPOT", "ms", 1e-3),
    "e2e_s": ("end-to-end", "s", 1.0),
    "throughput_tok_s": ("throughput", "tok/s", 1.0),
    "throughput_per_chip_tok_s": ("throughput per chip", "tok/s/chip", 1.0),
    "chips": ("chips used", "", 1.0),
    "memory_bytes": ("memory per chip", "GB", 1e9),
    "memory_fraction": ("memory used", "%", 1e-2),
    "cost_per_mtok_usd": ("cost", "USD/Mtok", 1.0),
    "energy_per_token_j": ("energy", "J/tok", 1.0),
    # axes (jaxplat.study.AXIS_KINDS)
    "model": ("model", "", 1.0),
    "workload": ("use case", "", 1.0),
    "tp": ("TP", "", 1.0), "pp": ("PP", "", 1.0), "ep": ("EP", "", 1.0), "dp": ("DP", "", 1.0),
    "sp": ("SP", "", 1.0), "microbatches": ("micro-batches", "", 1.0),
    "overlap": ("communication hidden", "%", 1e-2),
    "batch": ("batch", "seq", 1.0),
    "prompt": ("prompt", "tok", 1.0),
    "output": ("output", "tok", 1.0),
    "beams": ("beams", "", 1.0),
    "dtype": ("dtype", "", 1.0), "weight_dtype": ("weight dtype", "", 1.0), "kv_dtype": ("KV dtype", "", 1.0),
    "flops": ("dense BF16 compute", "TFLOP/s", 1e12),
    "hbm_bandwidth": ("HBM bandwidth", "TB/s", 1e12),
    "hbm_size": ("HBM capacity", "GB", 1e9),
    "sram_size": ("SRAM capacity", "MB", 1e6),
    "sram_bandwidth": ("SRAM bandwidth", "TB/s", 1e12),
    "link_bandwidth": ("scale-up link", "GB/s", 1e9),
    "link_latency": ("scale-up latency", "µs", 1e-6),
    "domain": ("scale-up domain", "chips", 1.0),
    "scaleout_bandwidth": ("scale-out link", "GB/s", 1e9),
    "scaleout_latency": ("scale-out latency", "µs", 1e-6),
    "eff_compute": ("compute efficiency", "%", 1e-2),
    "eff_memory": ("memory efficiency", "%", 1e-2),
    "eff_network": ("network efficiency", "%", 1e-2),
    "price": ("chip price", "USD", 1.0),
    "tdp": ("TDP", "W", 1.0),
    # bookkeeping
    "rank": ("#", "", 1.0),
    "index": ("configuration no.", "", 1.0),
}
# sweep metric name -> its column (jaxplat.commands.sweep.metric_columns)
_METRIC_SUFFIXES = ("", "_s", "_tok_s")
# hardware axes where a smaller value is the harder requirement to meet (its
# requirement is the largest value that works)
LOWER_IS_BETTER = {"link_latency", "scaleout_latency", "price", "tdp"}
HARDWARE_AXES = {"flops", "hbm_bandwidth", "hbm_size", "sram_size", "sram_bandwidth", "link_bandwidth",
                 "link_latency", "domain", "scaleout_bandwidth", "scaleout_latency", "eff_compute", "eff_memory",
                 "eff_network", "price", "tdp"}
CATEGORICAL_AXES = {"model", "workload", "dtype", "weight_dtype", "kv_dtype", "tp", "pp", "ep", "dp", "sp",
                    "microbatches", "chips", "batch", "beams", "domain"}

SWEEP_COUNTERS = (  # summary key -> row label
    ("configurations", "configurations in the study"),
    ("evaluated", "evaluated"),
    ("feasible", "feasible: parallelism divides the model and it fits in memory"),
    ("ok", "meet every constraint"),
    ("over_chips", "rejected: more chips than allowed"),
    ("wrong_chips", "rejected: not exactly the chips of the chips axis"),
    ("over_ttft", "rejected: TTFT over its SLO"),
    ("over_tpot", "rejected: TPOT over its SLO"),
    ("over_memory", "rejected: memory over the allowed fraction"),
)

# co-design
OBJECTIVE_NAMES = {"cost_per_mtok": ("cost per million tokens", "USD/Mtok"),
                   "usd_per_tok_s": ("chip capex per token/s", "USD/(tok/s)"),
                   "joules_per_token": ("energy per token", "J/tok")}
CHIP_ROWS = (  # key in summary["chip"], name, unit, SI per unit, key in summary["bounds"]
    ("flops_bf16", "dense BF16 compute", "TFLOP/s", 1e12, "flops"),
    ("sram_bytes", "SRAM capacity", "MB", 1e6, "sram"),
    ("hbm_stacks", "HBM stacks", "", 1.0, "hbm_stacks"),
    ("hbm_bytes", "HBM capacity", "GB", 1e9, None),
    ("hbm_bytes_s", "HBM bandwidth", "TB/s", 1e12, None),
    ("link_bytes_s", "scale-up link, per direction", "GB/s", 1e9, "link_bw"),
    ("area_mm2", "die area", "mm²", 1.0, None),
    ("tdp_w", "TDP", "W", 1.0, None),
    ("price_usd", "price", "USD", 1.0, None),
)
CODESIGN_METRICS = (  # key in summary["metrics"], name, unit, SI per unit, SLO key
    ("ttft", "TTFT", "ms", 1e-3, "ttft_s"),
    ("tpot", "TPOT", "ms", 1e-3, "tpot_s"),
    ("throughput", "throughput", "tok/s", 1.0, None),
    ("energy_per_token_j", "energy per token", "J/tok", 1.0, None),
    ("power_w", "average power", "W", 1.0, None),
    ("cost_per_mtok_usd", "cost per million tokens", "USD/Mtok", 1.0, None),
    ("memory_bytes", "memory per chip", "GB", 1e9, None),
    ("chips", "chips used", "", 1.0, None),
)
TRAJECTORY_PARAMS = (  # trajectory.csv column, name, unit, SI per unit
    ("flops", "dense BF16 compute", "TFLOP/s", 1e12),
    ("sram", "SRAM capacity", "MB", 1e6),
    ("hbm_stacks", "HBM stacks", "", 1.0),
    ("link_bw", "scale-up link", "GB/s", 1e9),
)
ELASTIC_METRIC_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "throughput": "throughput",
                        "energy_per_token_j": "energy per token", "cost_per_mtok_usd": "cost per Mtok"}
_HW_FIELDS = {  # Hardware field -> name ({level} where it has levels)
    "flops": "peak compute", "sram_size": "SRAM capacity", "sram_bw": "SRAM bandwidth",
    "mem_size": "{level} capacity", "mem_bw": "{level} bandwidth", "net_domain": "{level} domain size",
    "net_bw": "{level} link bandwidth", "net_latency": "{level} latency", "eff_compute": "compute efficiency",
    "eff_memory": "memory efficiency", "eff_network": "network efficiency", "tdp": "TDP", "price": "chip price",
    "energy_flop": "energy per FLOP", "energy_sram": "SRAM energy per byte", "energy_mem": "{level} energy per byte",
    "energy_net": "{level} energy per byte sent", "static_power": "static power", "lifetime": "lifetime",
    "energy_price": "electricity price", "pue": "PUE",
}
_MEM_LEVELS = ("HBM", "host memory", "memory level 3")
_NET_LEVELS = ("scale-up", "scale-out", "network level 3")

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
          "#7f7f7f")


def column_info(col: str) -> tuple[str, str, float]:
    """(readable name, unit, SI per unit) of a table column; unknown ones as they are."""
    if col in COLUMNS:
        return COLUMNS[col]
    if col.startswith("best_"):  # axes.csv: best_<metric name>, the metric without its unit suffix
        metric = col[5:]
        key = next((metric + suf for suf in _METRIC_SUFFIXES if metric + suf in COLUMNS), metric)
        name, unit, scale = column_info(key)
        return f"best {name}", unit, scale
    for suf in _METRIC_SUFFIXES[1:]:  # a metric by its name (summary.json's objective and pareto)
        if col + suf in COLUMNS:
            return COLUMNS[col + suf]
    return col.replace("_", " "), "", 1.0


def header(col: str) -> str:
    name, unit, _ = column_info(col)
    return f"{name} [{unit}]" if unit else name


def header_html(col: str, extra: str = "") -> str:
    """A table header: the name, the unit on its own line (narrow columns)."""
    name, unit, _ = column_info(col)
    return _esc(name) + (f"<br>[{_esc(unit)}]" if unit else "") + (f"<br>{_esc(extra)}" if extra else "")


def log_axis(values) -> dict:
    """Plotly settings of a log axis over `values` with readable ticks: 1-2-5
    per decade (or decades on a wide range), written out in full."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x) and x > 0], np.float64)
    if not len(v):
        return dict(type="log")
    lo, hi = math.floor(math.log10(v.min())), math.ceil(math.log10(v.max()))
    mult = (1, 2, 5) if hi - lo <= 3 else (1,) if hi - lo <= 8 else None
    if mult is None:
        return dict(type="log")
    ticks = [m * 10.0 ** k for k in range(lo, hi + 1) for m in mult]
    ticks = [t for t in ticks if v.min() / 1.6 <= t <= v.max() * 1.6]
    return dict(type="log", tickvals=ticks, ticktext=[fmt(t) for t in ticks], minor=dict(showgrid=False))


def hardware_number_name(label: str) -> str:
    """'mem_bw[0]' -> 'HBM bandwidth', 'flops[bf16]' -> 'peak compute (bf16)'."""
    field, _, rest = label.partition("[")
    idx = rest.rstrip("]")
    name = _HW_FIELDS.get(field, field.replace("_", " "))
    if "{level}" in name:
        levels = _MEM_LEVELS if field.startswith("mem") or field == "energy_mem" else _NET_LEVELS
        lvl = levels[int(idx)] if idx.isdigit() and int(idx) < len(levels) else f"level {idx}"
        return name.format(level=lvl)
    return f"{name} ({idx})" if idx else name


def fmt(v, digits: int = 4) -> str:
    """A number for a table cell: 4 significant digits, thousands separated."""
    if v is None:
        return "n/a"
    if isinstance(v, str):
        return v
    v = float(v)
    if not math.isfinite(v):
        return "n/a"
    if abs(v) < 1e3 and v != round(v):
        v = float(f"{v:.{digits}g}")  # rounded first: 999.99 is 1,000
    a = abs(v)
    if a >= 1e3 or (v == round(v) and a < 1e15):
        return f"{v:,.0f}"
    if a >= 1e-3:
        return f"{v:.{digits}g}"
    return f"{v:.{digits - 1}e}"


def fmt_col(col: str, v) -> str:
    """A table value of column `col` in its shown unit."""
    if isinstance(v, str):
        return v
    _, _, scale = column_info(col)
    return fmt(None if v is None else float(v) / scale)


# ------------------------------------------------------------- reading

def _read_json(path: Path) -> dict:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SpecError(f"{path}: not a readable JSON summary ({type(e).__name__}: {e})") from None
    if not isinstance(d, dict):
        raise SpecError(f"{path}: expected a JSON object")
    return d


def _read_csv(out: Path, name: str, required: bool = True, columns=()):
    import pandas as pd

    path = out / name
    if not path.is_file():
        if required:
            raise SpecError(f"{out}: has summary.json but no {name} (rerun the command that wrote this folder)")
        return None
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError) as e:  # pandas' parser errors are ValueErrors
        raise SpecError(f"{path}: not a readable table ({type(e).__name__}: {str(e).splitlines()[0]})") from None
    missing = [c for c in columns if not any(k == c or (c.endswith("*") and k.startswith(c[:-1])) for k in df.columns)]
    if missing:
        raise SpecError(f"{path}: no column for {', '.join(c.rstrip('*') for c in missing)}")
    return df


def load(out_dir) -> dict:
    """The output folder's summary and tables; SpecError if it is not one."""
    out = Path(out_dir)
    if not out.exists():
        raise SpecError(f"output folder not found: {out}")
    if not out.is_dir():
        raise SpecError(f"not a folder: {out} (give the --out folder of jaxplat sweep or jaxplat codesign)")
    if not (out / "summary.json").is_file():
        raise SpecError(f"{out}: no summary.json here; not the output folder of jaxplat sweep or codesign")
    summary = _read_json(out / "summary.json")
    kind = summary.get("kind") or ("sweep" if "configurations" in summary
                                    else "codesign" if "chip" in summary else None)
    if kind == "sweep":
        missing = [k for k in ("configurations", "feasible", "ok", "objective", "pareto") if k not in summary]
        if missing:
            raise SpecError(f"{out / 'summary.json'}: a sweep summary without {', '.join(missing)}")
        if not (isinstance(summary["pareto"], list) and len(summary["pareto"]) == 2):
            raise SpecError(f"{out / 'summary.json'}: pareto must name two metrics")
        metrics = [summary["objective"].split(" ")[-1]] + list(summary["pareto"])
        need = [m + "*" for m in metrics]
        data = dict(kind=kind, out=out, summary=summary, top_k=_read_csv(out, "top_k.csv", columns=["rank"] + need),
                    pareto=_read_csv(out, "pareto.csv", columns=need),
                    axes=_read_csv(out, "axes.csv", columns=("group", "axis", "value", "n_feasible", "n_ok",
                                                             "best_*")),
                    histogram=_read_csv(out, "histogram.csv", required=False, columns=("bin_lo", "bin_hi", "count")))
    elif kind == "codesign":
        missing = [k for k in ("objective", "chip", "metrics", "parallel") if k not in summary]
        if missing:
            raise SpecError(f"{out / 'summary.json'}: a co-design summary without {', '.join(missing)}")
        data = dict(kind=kind, out=out, summary=summary,
                    trajectory=_read_csv(out, "trajectory.csv", columns=("step", "start", "loss")),
                    sensitivities=_read_csv(out, "sensitivities.csv", required=False,
                                            columns=("number", "metric", "autodiff", "finite_difference")))
    else:
        raise SpecError(f"{out / 'summary.json'}: neither a sweep's nor a co-design's summary")
    return data


# ------------------------------------------------------------- HTML pieces

CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif; margin: 0;
       color: #222; background: #fafafa; }
main { max-width: 1500px; margin: 0 auto; padding: 16px 24px 40px; background: #fff; }
h1 { font-size: 1.6em; margin: 0.4em 0 0.1em; }
h2 { font-size: 1.25em; margin: 1.6em 0 0.4em; border-bottom: 1px solid #ddd; padding-bottom: 3px; }
p.sub { color: #555; margin: 0 0 1em; }
p.note { color: #555; font-size: 0.9em; max-width: 980px; }
table { border-collapse: collapse; font-size: 0.86em; margin: 0.4em 0 0.6em; }
th, td { padding: 3px 9px; border-bottom: 1px solid #e4e4e4; }
th { background: #f0f2f5; text-align: left; vertical-align: bottom; font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td:first-child { white-space: nowrap; }
th.obj, td.obj { background: #fff6d9; }
tr:nth-child(even) td { background: #fafbfc; }
tr:nth-child(even) td.obj { background: #fbf0cc; }
.wide { overflow-x: auto; }
table.compact { font-size: 0.76em; }
table.compact th, table.compact td { padding: 2px 5px; }
.swatch { display: inline-block; width: 0.8em; height: 0.8em; border-radius: 50%; margin-right: 5px;
          vertical-align: -1px; }
.warn { background: #fff3f3; border-left: 4px solid #d62728; padding: 6px 10px; }
"""


def _esc(s) -> str:
    return html.escape(str(s))


def table_html(headers, rows, *, numeric=None, keys=None, table_id=None, highlight=None) -> str:
    """An HTML table; `numeric` marks right-aligned columns, `keys` gives each
    row a data-key, `highlight` a column index to shade."""
    numeric = numeric or [False] * len(headers)
    cls = lambda j: " ".join(c for c in ("n" if numeric[j] else "", "obj" if j == highlight else "") if c)  # noqa: E731
    attr = lambda j: f' class="{cls(j)}"' if cls(j) else ""  # noqa: E731
    head = "".join(f"<th{attr(j)}>{h}</th>" for j, h in enumerate(headers))  # headers may hold markup
    body = []
    for i, r in enumerate(rows):
        key = f' data-key="{_esc(keys[i])}"' if keys else ""
        body.append(f"<tr{key}>" + "".join(f"<td{attr(j)}>{_esc(c)}</td>" for j, c in enumerate(r)) + "</tr>")
    tid = f' id="{_esc(table_id)}"' if table_id else ""
    if len(headers) > 12:
        tid += ' class="compact"'
    return f'<div class="wide"><table{tid}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


class _Figures:
    """Plotly figures as HTML fragments; the first one carries plotly.js."""

    def __init__(self):
        self.first = True

    def __call__(self, fig) -> str:
        out = fig.to_html(full_html=False, include_plotlyjs=self.first, include_mathjax=False,
                          config={"displaylogo": False, "responsive": True})
        self.first = False
        return out


def _page(title: str, body: str) -> str:
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_esc(title)}</title><style>{CSS}</style></head>"
            f"<body><main>{body}<p class=note>Written by <code>jaxplat report</code> on {stamp}.</p>"
            f"</main></body></html>\n")


def _log_if_wide(vals) -> bool:
    v = np.asarray([x for x in vals if x is not None and np.isfinite(x)], np.float64)
    return bool(len(v) and v.min() > 0 and v.max() / v.min() > 20)


# ------------------------------------------------------------- sweep page

def metric_column(frame, metric: str) -> str:
    for suf in _METRIC_SUFFIXES:
        if metric + suf in frame.columns:
            return metric + suf
    raise SpecError(f"pareto.csv has no column for the metric {metric!r}")


def _axis_names(data) -> list[str]:
    s = data["summary"]
    if s.get("axes"):
        return list(s["axes"])
    return list(dict.fromkeys(data["axes"]["axis"].astype(str)))  # older summaries: axes.csv's order


def _group_axis(data) -> str | None:
    s = data["summary"]
    if "group_by" in s:
        return s["group_by"]
    groups = set(data["axes"]["group"].dropna().astype(str)) - {""}
    if not groups:
        return None
    for a in _axis_names(data):  # older summaries: the axis whose labels are the groups
        values = set(data["axes"].loc[data["axes"]["axis"] == a, "value"].astype(str))
        if a in data["top_k"].columns and values == groups:
            return a
    return None


def _group_label(data, g) -> str:
    """A group as shown: a number in its unit (8 chips, not 8.0), a name as it is."""
    gcol = _group_axis(data)
    if not g:
        return "all"
    return fmt_col(gcol, float(g)) if gcol and _is_numeric([g]) else str(g)


def _metric_col(data, metric: str) -> str:
    for frame in (data["pareto"], data["top_k"]):
        try:
            return metric_column(frame, metric)
        except SpecError:
            pass
    return metric


def _groups(data) -> list[str]:
    g = data["axes"]["group"].fillna("").astype(str)
    return [x for x in dict.fromkeys(g) if x]


def _hover(row, cols) -> str:
    return "<br>".join(f"{'rank' if c == 'rank' else _esc(header(c))}: {_esc(fmt_col(c, row[c]))}"
                       for c in cols if c in row.index)


def _pareto_figure(data, colors, obj_col):
    import plotly.graph_objects as go

    s, front, top = data["summary"], data["pareto"], data["top_k"]
    xm, ym = s["pareto"]
    xc, yc = metric_column(front if len(front) else top, xm), metric_column(front if len(front) else top, ym)
    (xn, xu, xs), (yn, yu, ys) = column_info(xc), column_info(yc)
    gcol = _group_axis(data)
    hover_cols = [c for c in front.columns if c != "index"]
    fig = go.Figure()
    if len(front):
        f = front.sort_values(xc)
        fig.add_trace(go.Scatter(x=f[xc] / xs, y=f[yc] / ys, mode="lines", line=dict(color="#999", width=1, shape="hv"),
                                 name="Pareto front", hoverinfo="skip"))
    if gcol:
        present = {str(g) for g in list(front.get(gcol, [])) + list(top.get(gcol, []))}
        groups = [g for g in _groups(data) if g in present] + sorted(present - set(_groups(data)))
    else:
        groups = [None]
    obj = column_info(obj_col)[0]
    for g in groups:
        color = colors.get(g, COLORS[0])
        name = _group_label(data, g) if g is not None else "Pareto front"
        fsel = front[front[gcol].astype(str) == g] if g is not None else front
        tsel = top[top[gcol].astype(str) == g] if g is not None else top
        if len(fsel):
            fig.add_trace(go.Scatter(x=fsel[xc] / xs, y=fsel[yc] / ys, mode="markers", name=name, legendgroup=name,
                                     marker=dict(color=color, size=10, line=dict(color="white", width=1)),
                                     text=[_hover(r, hover_cols) for _, r in fsel.iterrows()],
                                     hovertemplate="<b>Pareto front</b><br>%{text}<extra></extra>"))
        if len(tsel):
            fig.add_trace(go.Scatter(x=tsel[xc] / xs, y=tsel[yc] / ys, mode="markers", name=name, legendgroup=name,
                                     showlegend=not len(fsel),
                                     marker=dict(color=color, size=9, symbol="diamond-open", line=dict(width=1.5)),
                                     text=[_hover(r, ["rank"] + hover_cols) for _, r in tsel.iterrows()],
                                     hovertemplate=f"<b>top-{len(top)} by {_esc(obj)}</b><br>%{{text}}<extra></extra>"))
    if len(top):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers",
                                 name=f"top {len(top)} by {column_info(obj_col)[0]}",
                                 marker=dict(color="#555", size=9, symbol="diamond-open")))
    xv, yv = list(front[xc] / xs) + list(top[xc] / xs), list(front[yc] / ys) + list(top[yc] / ys)
    fig.update_xaxes(title_text=f"{xn} [{xu}]" if xu else xn, showgrid=True, gridcolor="#eee", zeroline=False,
                     **(log_axis(xv) if _log_if_wide(xv) else {}))
    fig.update_yaxes(title_text=f"{yn} [{yu}]" if yu else yn, showgrid=True, gridcolor="#eee", zeroline=False,
                     **(log_axis(yv) if _log_if_wide(yv) else {}))
    fig.update_layout(height=520, template="plotly_white", margin=dict(l=70, r=20, t=30, b=60),
                      legend=dict(title_text=header(gcol) if gcol else "", bgcolor="rgba(255,255,255,0.85)",
                                  bordercolor="#ddd", borderwidth=1),
                      hoverlabel=dict(align="left"))
    return fig


def _axis_figure(data, colors, a):
    """One axis: the share of its configurations meeting every constraint,
    and the best objective, per value (one line per group)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    s, ax = data["summary"], data["axes"]
    obj_col = [c for c in ax.columns if c.startswith("best_")][0]
    on, ou, osc = column_info(obj_col)
    groups = _groups(data) or [""]
    sub = ax[ax["axis"] == a]
    per_value = s["configurations"] / (len(groups) * sub["value"].nunique())  # with a given group and value
    _, _, scale = column_info(a)
    categorical = a in CATEGORICAL_AXES or not _is_numeric(sub["value"])
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.09,
                        subplot_titles=["share of its configurations meeting every constraint",
                                        f"{on} among them"])
    best_all = []
    for g in groups:
        rows = sub[sub["group"].fillna("").astype(str) == g]
        xv = ([fmt_col(a, _num_or_str(v)) for v in rows["value"]] if categorical
              else [float(v) / scale for v in rows["value"]])
        share = 100.0 * rows["n_ok"].to_numpy(np.float64) / per_value
        best = rows[obj_col].to_numpy(np.float64) / osc
        best_all += list(best)
        name = _group_label(data, g)
        color = colors.get(g, COLORS[0])
        hov = [f"{_esc(name)}<br>{_esc(header(a))}: {x if isinstance(x, str) else fmt(x)}<br>"
               f"meet every constraint: {fmt(ok)} of {fmt(per_value)} ({fmt(sh)} %)<br>feasible: {fmt(fe)}<br>"
               f"{_esc(on)}: {fmt(b)} {_esc(ou)}"
               for x, ok, sh, fe, b in zip(xv, rows["n_ok"], share, rows["n_feasible"], best)]
        common = dict(x=xv, mode="lines+markers", name=name, legendgroup=name, line=dict(color=color, width=1.6),
                      marker=dict(size=5, color=color), text=hov, hovertemplate="%{text}<extra></extra>")
        fig.add_trace(go.Scatter(y=share, showlegend=True, **common), row=1, col=1)
        fig.add_trace(go.Scatter(y=best, showlegend=False, **common), row=1, col=2)
    xs_ = [] if categorical else list(sub["value"].astype(float) / scale)
    for col in (1, 2):
        fig.update_xaxes(row=1, col=col, title_text=header(a), title_standoff=4,
                         **({"type": "category"} if categorical else log_axis(xs_) if _log_if_wide(xs_) else {}))
    fig.update_yaxes(title_text="% of configurations", row=1, col=1, rangemode="tozero")
    fig.update_yaxes(title_text=f"{on} [{ou}]" if ou else on, row=1, col=2,
                     **(log_axis(best_all) if _log_if_wide(best_all) else {}))
    fig.update_xaxes(showgrid=True, gridcolor="#eee")
    fig.update_yaxes(showgrid=True, gridcolor="#eee")
    fig.update_annotations(font_size=12)
    gcol = _group_axis(data)
    fig.update_layout(height=360, template="plotly_white", margin=dict(l=70, r=20, t=80, b=45),
                      title=dict(text=f"<b>{_esc(header(a))}</b>", x=0, xanchor="left", y=0.98, font_size=15),
                      hoverlabel=dict(align="left"), showlegend=bool(gcol),
                      legend=dict(orientation="h", yanchor="bottom", y=1.13, xanchor="right", x=1.0,
                                  title_text=header(gcol) + ":" if gcol else ""))
    return fig


def _is_numeric(values) -> bool:
    try:
        [float(v) for v in values]
        return True
    except (TypeError, ValueError):
        return False


def _num_or_str(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v)


def _histogram_figure(data, obj_col):
    import plotly.graph_objects as go

    on, ou, osc = column_info(obj_col)
    h = data["histogram"]
    lo = h["bin_lo"].to_numpy(np.float64) / osc
    hi = h["bin_hi"].to_numpy(np.float64) / osc
    inner = (lo > 0) & np.isfinite(hi)
    if not inner.any():
        return None
    ratio = float(np.median(hi[inner] / lo[inner]))
    lo = np.where(lo > 0, lo, hi / ratio)  # the under- and overflow bins drawn one bin wide
    hi = np.where(np.isfinite(hi), hi, lo * ratio)
    keep = h["count"].to_numpy() > 0
    if not keep.any():
        return None
    first, last = np.argmax(keep), len(keep) - 1 - np.argmax(keep[::-1])
    sl = slice(first, last + 1)
    label = [("below " + fmt(b) if a0 == 0 else "above " + fmt(a) if not np.isfinite(b0) else f"{fmt(a)} – {fmt(b)}")
             + f" {ou}: {fmt(c)} configurations"
             for a, b, a0, b0, c in zip(lo[sl], hi[sl], h["bin_lo"][sl], h["bin_hi"][sl], h["count"][sl])]
    fig = go.Figure(go.Scatter(x=np.sqrt(lo[sl] * hi[sl]), y=h["count"][sl], mode="lines+markers",
                               line=dict(shape="hvh", color="#1f77b4"), fill="tozeroy", text=label,
                               hovertemplate="%{text}<extra></extra>", name=""))
    fig.update_xaxes(title_text=f"{on} [{ou}]" if ou else on, showgrid=True, gridcolor="#eee",
                     **log_axis(list(lo[sl]) + list(hi[sl])))
    fig.update_yaxes(title_text="configurations", showgrid=True, gridcolor="#eee")
    fig.update_layout(height=340, template="plotly_white", margin=dict(l=70, r=20, t=20, b=50), showlegend=False)
    return fig


def _requirements(data, group_axis) -> tuple[list, list, list] | None:
    """Per group: the SLOs and, per hardware axis, the weakest value that still
    has a configuration meeting every constraint."""
    s, ax = data["summary"], data["axes"]
    hw = [a for a in _axis_names(data) if a in HARDWARE_AXES and (ax["axis"] == a).any()]
    if not hw:
        return None
    groups = _groups(data) or [""]
    cons = s.get("constraints") or {}
    obj_col = [c for c in ax.columns if c.startswith("best_")][0]
    heads = [_esc(header(group_axis) if group_axis else "group")]
    slo_cols = [(k, n) for k, n in (("ttft_s", "TTFT"), ("tpot_s", "TPOT")) if cons.get(k) is not None]
    heads += [f"{n} SLO<br>[ms]" for _, n in slo_cols]
    heads += ["configurations<br>meeting every<br>constraint", header_html(obj_col)]
    heads += [header_html(a, "at most" if a in LOWER_IS_BETTER else "at least") for a in hw]
    rows, keys = [], []
    for g in groups:
        rs = ax[ax["group"].fillna("").astype(str) == g]
        row = [_group_label(data, g)]
        for k, _ in slo_cols:
            v = cons[k].get(g) if isinstance(cons[k], dict) else cons[k]
            row.append("none" if v is None else fmt(v / 1e-3))
        first = rs[rs["axis"] == hw[0]]
        row.append(fmt(int(first["n_ok"].sum())))
        best = first[obj_col].min() if len(first) else float("nan")
        row.append(fmt_col(obj_col, best))
        for a in hw:
            sub = rs[rs["axis"] == a]
            vals = sub["value"].astype(float).to_numpy()
            ok = sub["n_ok"].to_numpy() > 0
            if not ok.any():
                row.append("none works")
                continue
            if a in LOWER_IS_BETTER:
                v, edge, mark = vals[ok].max(), vals.max(), "≥ "
            else:
                v, edge, mark = vals[ok].min(), vals.min(), "≤ "
            row.append((mark if v == edge else "") + fmt_col(a, v))
        rows.append(row)
        keys.append(g)
    return heads, rows, keys


def sweep_page(data) -> str:
    s = data["summary"]
    figs = _Figures()
    gcol = _group_axis(data)
    groups = _groups(data)
    colors = {g: COLORS[i % len(COLORS)] for i, g in enumerate(groups)}
    obj_dir, obj = (s["objective"].split(" ", 1) + [""])[:2]
    obj_col = metric_column(data["top_k"], obj) if len(data["top_k"].columns) else obj
    title = f"Sweep: {s.get('study', data['out'].name)}"
    parts = [f"<h1>{_esc(title)}</h1>"]
    what = []
    if s.get("models"):
        what.append("model " + ", ".join(s["models"]))
    if s.get("workloads"):
        what.append("use case " + ", ".join(s["workloads"]))
    if s.get("hardware"):
        what.append(f"chip numbers not swept: {s['hardware']}")
    what.append(f"objective: {obj_dir} {header(obj_col)}")
    parts.append(f'<p class="sub">{_esc("; ".join(what))}. Folder: <code>{_esc(data["out"].resolve())}</code></p>')

    # summary
    total = float(s["configurations"]) or 1.0
    rows, keys = [], []
    for k, label in SWEEP_COUNTERS:
        if k in s and (not k.startswith(("over_", "wrong_")) or s[k]):
            rows.append([label, fmt(s[k]), f"{100.0 * s[k] / total:.3g} %"])
            keys.append(k)
    for k, label, unit in (("pareto_points", "points on the Pareto front", ""),
                           ("pareto_truncated_per_block", "Pareto points cut (front longer than its buffer)", ""),
                           ("devices", "devices", ""), ("compile_s", "compile time", "s"),
                           ("sweep_s", "sweep time", "s"), ("configs_per_s", "evaluation rate", "configurations/s")):
        if k in s and (k != "pareto_truncated_per_block" or s[k]):
            rows.append([label + (f" [{unit}]" if unit else ""), fmt(s[k]), ""])
            keys.append(k)
    parts.append("<h2>Summary</h2>")
    parts.append(table_html(["", "value", "share of all configurations"], rows, numeric=[False, True, True],
                            keys=keys, table_id="summary"))
    cons = s.get("constraints") or {}
    notes = []
    if cons.get("max_chips") is not None:
        notes.append(f"at most {fmt(cons['max_chips'])} chips")
    for k, n in (("ttft_s", "TTFT"), ("tpot_s", "TPOT")):
        v = cons.get(k)
        if isinstance(v, dict):
            notes.append(f"{n} within each use case's SLO (table below)")
        elif v is not None:
            notes.append(f"{n} ≤ {fmt(v / 1e-3)} ms")
    if cons.get("max_memory_fraction") not in (None, 1.0):
        notes.append(f"memory ≤ {fmt(100 * cons['max_memory_fraction'])} % of capacity")
    if notes:
        parts.append(f'<p class="note">Constraints: {_esc("; ".join(notes))}. The rejection counts are among the '
                     f"feasible configurations; one configuration can miss several constraints.</p>")

    # Pareto front
    xm, ym = s["pareto"]
    parts.append(f"<h2>Pareto front: {_esc(column_info(_metric_col(data, xm))[0])} against "
                 f"{_esc(column_info(_metric_col(data, ym))[0])}</h2>")
    if len(data["pareto"]) or len(data["top_k"]):
        parts.append(figs(_pareto_figure(data, colors, obj_col)))
        ax = data["axes"]
        first_axis = ax[ax["axis"] == ax["axis"].iloc[0]] if len(ax) else ax
        n_ok = {g: int(first_axis.loc[first_axis["group"].fillna("").astype(str) == g, "n_ok"].sum()) for g in groups}
        on_front = set(data["pareto"][gcol].astype(str)) if gcol and gcol in data["pareto"] else set()
        none_ok = [_group_label(data, g) for g in groups if gcol and n_ok[g] == 0]
        dominated = [_group_label(data, g) for g in groups if gcol and n_ok[g] > 0 and g not in on_front]
        what = _esc(header(gcol) if gcol else "group")
        parts.append(
            f'<p class="note">Filled circles: the Pareto front of all the configurations that meet every constraint, '
            f"whatever their {what}; no other configuration is better on both axes. "
            f"Open diamonds: the top {len(data['top_k'])} by {_esc(header(obj_col))}. Hover for each point's "
            "configuration."
            + (f" Not on the front, dominated by the others: {_esc(', '.join(dominated))}." if dominated else "")
            + (f" No configuration meets every constraint: {_esc(', '.join(none_ok))}." if none_ok else "") + "</p>")
    else:
        parts.append('<p class="warn">No configuration meets every constraint: no front, no top-k.</p>')

    # requirements
    req = _requirements(data, gcol)
    if req:
        heads, rows, keys = req
        parts.append(f"<h2>What each {_esc(header(gcol) if gcol else 'study')} needs</h2>")
        parts.append(table_html(heads, rows, numeric=[False] + [True] * (len(heads) - 1),
                                keys=keys, table_id="requirements"))
        parts.append('<p class="note">For each hardware axis, the weakest value (smallest, or largest for a latency, '
                     "price or power) with at least one configuration meeting every constraint, the other axes free. "
                     "≤ / ≥: the grid's own end already works, so the requirement is at most (at least) that. "
                     "Best objective: over all the configurations of the group.</p>")

    # per-axis
    names = _axis_names(data)
    ax = data["axes"]
    plot_axes = [a for a in names if a != gcol and ax.loc[ax["axis"] == a, "value"].nunique() > 1]
    if plot_axes:
        parts.append("<h2>Per axis: feasibility and best objective</h2>")
        parts.append('<p class="note">For each value of each axis: left, the share of the configurations with that '
                     f"value (and that {_esc(header(gcol) if gcol else 'group')}) that meet every constraint; right, "
                     "the best objective among them (a gap: none meets).</p>")
        for a in plot_axes:
            parts.append(figs(_axis_figure(data, colors, a)))

    # top-k table
    top = data["top_k"]
    if len(top):
        cols = ["rank"] + [a for a in names if a in top.columns] + _metric_order(top, names, obj_col, s)
        cols = [c for c in cols if c in top.columns]
        parts.append(f"<h2>Top {len(top)} by {_esc(header(obj_col))} ({_esc(obj_dir)})</h2>")
        parts.append(_frame_table(top, cols, "top_k", highlight=obj_col))
    front = data["pareto"]
    if len(front):
        xc = metric_column(front, xm)
        cols = [a for a in names if a in front.columns] + _metric_order(front, names, obj_col, s)
        parts.append(f"<h2>Pareto front points ({len(front)}), by {_esc(header(xc))}</h2>")
        parts.append(_frame_table(front.sort_values(xc), [c for c in cols if c in front.columns], "pareto",
                                  highlight=xc))

    if data.get("histogram") is not None:
        fig = _histogram_figure(data, obj_col)
        if fig is not None:
            parts.append(f"<h2>Distribution of {_esc(header(obj_col))}</h2>")
            parts.append(figs(fig))
            parts.append('<p class="note">Configurations meeting every constraint, by objective (log-spaced bins; the '
                         "first and last bins hold everything outside the study's histogram range).</p>")
    return _page(title, "\n".join(parts))


def _metric_order(df, names, obj_col, s) -> list[str]:
    """Metric columns: the objective, the Pareto pair, then the rest as written."""
    metrics = [c for c in df.columns if c not in names and c not in ("rank", "index")]
    first = [obj_col] + [metric_column(df, m) for m in s["pareto"]]
    return list(dict.fromkeys([c for c in first if c in metrics] + metrics))


def _frame_table(df, cols, table_id, highlight=None, keep=()) -> str:
    """A DataFrame as a table; a column with one value in every row (and at
    least two rows) is said once above the table instead."""
    same = [c for c in cols if len(df) > 1 and c not in keep and c != highlight and c != "rank"
            and df[c].nunique(dropna=False) == 1]
    cols = [c for c in cols if c not in same]
    rows = [[fmt_col(c, r[c]) for c in cols] for _, r in df.iterrows()]
    numeric = [df[c].dtype.kind in "fiu" for c in cols]
    note = ""
    if same:
        said = "; ".join(f"{column_info(c)[0]} {fmt_col(c, df[c].iloc[0])}"
                         + (f" {column_info(c)[1]}" if column_info(c)[1] else "") for c in same)
        note = f'<p class="note" id="{_esc(table_id)}-same">The same in every row: {_esc(said)}.</p>'
    return note + table_html([header_html(c) for c in cols], rows, numeric=numeric, table_id=table_id,
                             highlight=cols.index(highlight) if highlight in cols else None)


# ------------------------------------------------------------- co-design page

def _trajectory_figure(data):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    t, s = data["trajectory"], data["summary"]
    best = int(s.get("best_start", t[t["step"] == t["step"].max()].sort_values("loss")["start"].iloc[0]))
    on, ou = OBJECTIVE_NAMES.get(s.get("objective_name"), (s.get("objective_name", "objective"), ""))
    panels = [("loss", "smooth loss", "", 1.0)] + list(TRAJECTORY_PARAMS) + [("schedule", "schedule", "", 1.0)]
    fig = make_subplots(rows=2, cols=3, subplot_titles=[
        "loss (log objective + SLO penalties)"] + [f"{n} [{u}]" if u else n for _, n, u, _ in TRAJECTORY_PARAMS] +
        ["annealing: temperature τ, hinge k, sharpness p"], horizontal_spacing=0.07, vertical_spacing=0.16)
    pos = [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]
    starts = sorted(t["start"].unique())
    bounds = s.get("bounds") or {}
    for (col, name, unit, scale), (r, c) in zip(panels[:-1], pos):
        for st in starts:
            d = t[t["start"] == st]
            is_best = st == best
            fig.add_trace(go.Scatter(
                x=d["step"], y=d[col] / scale, mode="lines",
                line=dict(color="#111" if is_best else COLORS[int(st) % len(COLORS)], width=2.6 if is_best else 1),
                opacity=1.0 if is_best else 0.55, name=f"best start (#{st})" if is_best else f"start #{st}",
                legendgroup=f"s{st}", showlegend=(col == "loss"),
                hovertemplate=f"start #{st}, step %{{x}}<br>{_esc(name)}: %{{y:.4g}} {_esc(unit)}<extra></extra>"),
                row=r, col=c)
        if col in bounds and bounds[col][0] != bounds[col][1]:
            for b in bounds[col]:
                fig.add_hline(y=b / scale, line=dict(color="#999", dash="dot", width=1), row=r, col=c)
        fig.update_yaxes(title_text=f"{name} [{unit}]" if unit else name, row=r, col=c,
                         **(log_axis(list(t[col] / scale) + [b / scale for b in bounds.get(col, [])])
                            if col in ("loss", "flops", "sram", "link_bw") else {}))
        fig.update_xaxes(title_text="step", row=r, col=c)
    first = t[t["start"] == starts[0]]
    for k, n, dash in (("tau", "temperature τ", "solid"), ("hinge", "hinge k", "dash"),
                       ("sharpness", "sharpness p", "dot")):
        if k in first:
            fig.add_trace(go.Scatter(x=first["step"], y=first[k], mode="lines", name=n, legendgroup="sched",
                                     line=dict(color="#8c564b", dash=dash, width=1.6),
                                     hovertemplate=f"step %{{x}}<br>{n}: %{{y:.4g}}<extra></extra>"), row=2, col=3)
    fig.update_yaxes(title_text="value", row=2, col=3,
                     **log_axis([v for k in ("tau", "hinge", "sharpness") if k in first for v in first[k]]))
    fig.update_xaxes(title_text="step", row=2, col=3)
    fig.update_xaxes(showgrid=True, gridcolor="#eee")
    fig.update_yaxes(showgrid=True, gridcolor="#eee")
    fig.update_annotations(font_size=13)
    fig.update_layout(height=720, template="plotly_white", margin=dict(l=70, r=20, t=40, b=50),
                      legend=dict(orientation="v", x=1.01, y=1.0, font_size=11))
    return fig


def _sensitivity_grid(sens):
    """(numbers kept, metrics, autodiff [N, M], finite difference [N, M]),
    the numbers ordered by their largest elasticity; a number is kept when
    some elasticity of it (either way of computing) is above 1e-4."""
    numbers = list(dict.fromkeys(sens["number"]))
    metrics = list(dict.fromkeys(sens["metric"]))
    ad, fd = (sens.pivot(index="number", columns="metric", values=v).reindex(index=numbers, columns=metrics)
              .to_numpy(np.float64) for v in ("autodiff", "finite_difference"))
    size = np.fmax(np.nan_to_num(np.abs(ad), nan=0.0), np.nan_to_num(np.abs(fd), nan=0.0)).max(axis=1)
    order = [i for i in np.argsort(-size, kind="stable") if size[i] > 1e-4]
    return [numbers[i] for i in order], metrics, ad[order], fd[order]


def _sensitivity_figure(sens):
    import plotly.graph_objects as go

    numbers, metrics, ad, fd = _sensitivity_grid(sens)
    if not numbers:
        return None
    z = np.where(np.isfinite(ad), ad, fd)  # where autodiff failed, the finite difference (marked)
    text = [[("n/a" if not np.isfinite(v) else _signed(v) + ("" if np.isfinite(a) or _signed(v) == "0" else " (fd)"))
             for v, a in zip(zr, ar)] for zr, ar in zip(z, ad)]
    lim = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
    fig = go.Figure(go.Heatmap(
        z=z, x=[ELASTIC_METRIC_NAMES.get(m, m) for m in metrics], y=[hardware_number_name(n) for n in numbers],
        zmin=-lim, zmax=lim, colorscale="RdBu_r", text=text, texttemplate="%{text}", xgap=2, ygap=2,
        colorbar=dict(title=dict(text="elasticity", side="right")),
        hovertemplate="+1 %% %{y} → %{z:+.3f} %% %{x}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(side="top")
    fig.update_layout(height=110 + 34 * len(numbers), template="plotly_white", margin=dict(l=210, r=20, t=50, b=20))
    return fig


def codesign_page(data) -> str:
    s = data["summary"]
    figs = _Figures()
    on, ou = OBJECTIVE_NAMES.get(s.get("objective_name"), (s.get("objective_name", "objective"), ""))
    title = f"Co-design: {s.get('name', data['out'].name)}"
    parts = [f"<h1>{_esc(title)}</h1>"]
    what = [x for x in (s.get("model") and f"model {s['model']}", s.get("workload") and f"use case {s['workload']}",
                        s.get("technology") and f"technology {s['technology']}") if x]
    what.append(f"objective: minimize {on} [{ou}]")
    parts.append(f'<p class="sub">{_esc("; ".join(what))}. Folder: <code>{_esc(data["out"].resolve())}</code></p>')

    rows, keys = [], []
    for k, label, unit, scale in (
            ("objective", f"{on}, optimizer (exact mode)", ou, 1.0),
            ("grid_objective", f"{on}, dense grid (the oracle)", ou, 1.0),
            ("gap", "gap, optimizer against grid (negative: optimizer better)", "%", 1e-2),
            ("evaluations", "cost-model evaluations, optimizer", "", 1.0),
            ("grid_evaluations", "cost-model evaluations, grid", "", 1.0),
            ("starts", "random starts", "", 1.0), ("steps", "optimizer steps", "", 1.0),
            ("optimizer_s", "optimizer time", "s", 1.0), ("grid_s", "grid time", "s", 1.0)):
        if k in s:
            rows.append([label, fmt(None if s[k] is None else s[k] / scale), unit])
            keys.append(k)
    parts.append("<h2>Summary</h2>")
    parts.append(table_html(["", "value", "unit"], rows, numeric=[False, True, False], keys=keys,
                            table_id="summary"))

    chip, gchip, bounds, lim = s["chip"], s.get("grid_chip") or {}, s.get("bounds") or {}, s.get("limits") or {}
    rows, keys = [], []
    for k, name, unit, scale, bkey in CHIP_ROWS:
        if k not in chip:
            continue
        b = bounds.get(bkey) if bkey else None
        rng = (f"{fmt(b[0] / scale)} – {fmt(b[1] / scale)}" if b and b[0] != b[1] else
               f"fixed {fmt(b[0] / scale)}" if b else
               f"≤ {fmt(lim['reticle_mm2'])} (reticle)" if k == "area_mm2" and "reticle_mm2" in lim else
               f"≤ {fmt(lim['power_limit_w'])}" if k == "tdp_w" and "power_limit_w" in lim else "")
        rows.append([f"{name} [{unit}]" if unit else name, fmt(chip[k] / scale),
                     fmt(gchip[k] / scale) if k in gchip else "–", rng])
        keys.append(k)
    parts.append("<h2>The chip</h2>")
    parts.append(table_html(["", "optimizer", "grid's best", "searched / limit"], rows,
                            numeric=[False, True, True, True], keys=keys, table_id="chip"))
    par = s["parallel"]
    parts.append('<p class="note">Parallelism and batch: ' +
                 _esc(", ".join(f"{k.upper() if k != 'batch' else 'batch'} {fmt(v)}" for k, v in par.items())) +
                 (f". Chip spec written to <code>{_esc(s['hardware_path'])}</code>" if s.get("hardware_path") else "")
                 + ".</p>")

    slo = s.get("slo") or {}
    rows, keys = [], []
    for k, name, unit, scale, sk in CODESIGN_METRICS:
        if k not in s["metrics"]:
            continue
        v = s["metrics"][k]
        lim_v = slo.get(sk) if sk else None
        meets = "" if lim_v is None or v is None else ("yes" if v <= lim_v * (1 + 1e-6) else "no")
        rows.append([f"{name} [{unit}]" if unit else name, fmt(None if v is None else v / scale),
                     fmt(lim_v / scale) if lim_v is not None else "", meets])
        keys.append(k)
    parts.append("<h2>Metrics of the chip (exact mode)</h2>")
    parts.append(table_html(["", "value", "SLO", "meets SLO"], rows, numeric=[False, True, True, False],
                            keys=keys, table_id="metrics"))

    parts.append("<h2>Optimizer trajectory</h2>")
    parts.append(figs(_trajectory_figure(data)))
    parts.append('<p class="note">Every random start (thin) and the start that was kept (black). Dotted lines: the '
                 "box searched. The loss is smooth-mode; the temperature, hinge and sharpness anneal towards exact "
                 "mode, so the loss can rise near the end while the chip settles.</p>")

    sens = data.get("sensitivities")
    parts.append("<h2>Sensitivities of the chip found</h2>")
    if sens is None or not len(sens):
        parts.append('<p class="note">No sensitivities.csv in this folder.</p>')
    else:
        bad = int((~np.isfinite(sens["autodiff"].to_numpy(np.float64))).sum())
        fig = _sensitivity_figure(sens)
        if bad:
            parts.append(f'<p class="warn">{bad} of {len(sens)} autodiff elasticities are not finite (NaN) in this '
                         "output: the figure shows the finite difference there, marked (fd).</p>")
        if fig is not None:
            parts.append(figs(fig))
            parts.append('<p class="note">Elasticity: d log(metric) / d log(hardware number), the % change of the '
                         "metric for +1 % of the number (autodiff, forward mode). Hardware numbers whose every "
                         "elasticity is below 1e-4 are left out. Each cell of the table: autodiff, then the central "
                         "finite difference (±1 %) in brackets.</p>")
            numbers, metrics, ad, fd = _sensitivity_grid(sens)
            rows = [[hardware_number_name(n)] + [f"{_signed(a)} ({_signed(f)})" for a, f in zip(ar, fr)]
                    for n, ar, fr in zip(numbers, ad, fd)]
            parts.append(table_html(["hardware number"] + [_esc(ELASTIC_METRIC_NAMES.get(m, m)) for m in metrics],
                                    rows, numeric=[False] + [True] * len(metrics), keys=numbers,
                                    table_id="sensitivities"))
        else:
            parts.append('<p class="note">No elasticity above 1e-4.</p>')
    return _page(title, "\n".join(parts))


def _signed(v) -> str:
    v = float(v)
    if not math.isfinite(v):
        return "n/a"
    return "0" if abs(v) < 5e-4 else f"{v:+.3f}"


# ------------------------------------------------------------- entry point

def render(out_dir) -> str:
    """The HTML page of an output folder."""
    data = load(out_dir)
    try:
        return sweep_page(data) if data["kind"] == "sweep" else codesign_page(data)
    except (KeyError, IndexError, TypeError, AttributeError) as e:  # a hand-edited or truncated folder
        raise SpecError(f"{data['out']}: unexpected contents ({type(e).__name__}: {e}); "
                        "rerun the command that wrote this folder") from None


def write_report(out_dir, output=None) -> Path:
    """Write the page (default OUT_DIR/report.html); returns its path."""
    page = render(out_dir)
    path = Path(output) if output else Path(out_dir) / REPORT_FILE
    if path.is_dir():
        path = path / REPORT_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(path)
    except OSError as e:
        raise SpecError(f"cannot write {path}: {e.strerror or e}") from None
    return path


__all__ = ["REPORT_FILE", "COLUMNS", "column_info", "header", "fmt", "load", "render", "write_report"]
