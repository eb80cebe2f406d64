"""The HTML report page of a sweep's output folder.
"""

import numpy as np

from jaxplat.report.html_common import (
    _METRIC_SUFFIXES,
    CATEGORICAL_AXES,
    COLORS,
    HARDWARE_AXES,
    LOWER_IS_BETTER,
    SWEEP_COUNTERS,
    _esc,
    _Figures,
    _log_if_wide,
    _page,
    column_info,
    fmt,
    fmt_col,
    header,
    header_html,
    log_axis,
    table_html,
)
from jaxplat.specs import SpecError


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
