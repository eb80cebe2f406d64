"""`jaxplat report OUT_DIR`: one self-contained HTML page (plotly embedded,
opens offline) of a sweep's or a co-design's output folder."""


def register(sub):
    p = sub.add_parser("report", help="an HTML page of a sweep's or co-design's output folder",
                       description="Turn the --out folder of `jaxplat sweep` or `jaxplat codesign` into one "
                                   "self-contained HTML page (works offline): Pareto front, per-axis feasibility "
                                   "and best objective, top-k; for co-design the trajectory and sensitivities.")
    p.add_argument("out_dir", help="output folder of jaxplat sweep or jaxplat codesign (holds summary.json)")
    p.add_argument("--output", "-o", help="HTML file to write (default: OUT_DIR/report.html)")
    p.set_defaults(func=run)


def run(args) -> int:
    from jaxplat.report import write_report

    print(write_report(args.out_dir, args.output))
    return 0
