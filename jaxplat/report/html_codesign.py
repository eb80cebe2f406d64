"""The HTML report page of a co-design's output folder.
"""

import math

import numpy as np

from jaxplat.report.html_common import (
    CHIP_ROWS,
    CODESIGN_METRICS,
    COLORS,
    ELASTIC_METRIC_NAMES,
    OBJECTIVE_NAMES,
    TRAJECTORY_PARAMS,
    _esc,
    _Figures,
    _page,
    fmt,
    hardware_number_name,
    log_axis,
    table_html,
)


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
    base = s.get("base")
    if base:  # the base chip at the designed chips' price basis (codesign.base_comparison)
        rows.append([f"{on}, base chip {base.get('name', '')} at its technology-model price "
                     f"(${base['price_usd']:,.0f}; street price ${base['street_price_usd']:,.0f} not compared)",
                     fmt(base.get("objective")), ou])
        keys.append("base_objective")
    parts.append("<h2>Summary</h2>")
    if s.get("price_basis"):
        parts.append(f'<p class="note">Prices: {_esc(s["price_basis"])}.</p>')
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
                         "finite difference (±1 %) in brackets. Whole-number structure (SM count, tile sides) "
                         "is a staircase with no useful derivative: its row, marked (whole step), is the central "
                         "finite difference from n - 1 to n + 1 in both places.</p>")
            numbers, metrics, ad, fd = _sensitivity_grid(sens)
            step = set(sens["number"][sens["method"] != "autodiff"]) if "method" in sens else set()
            rows = [[hardware_number_name(n) + (" (whole step)" if n in step else "")]
                    + [f"{_signed(a)} ({_signed(f)})" for a, f in zip(ar, fr)]
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
