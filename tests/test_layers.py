"""The house drawn from the code: packages import only the layers below them,
no module imports itself back through others, no module is over 600 lines,
and no module reaches into another package's underscore names.

The imports are read from the source (ast), top-level and inside functions
alike, so a function-level import cannot hide an arrow back up.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "jaxplat"
# Each package may import the packages listed after it in its row (DESIGN.md, "Packages").
MAY_IMPORT = {
    "specs": set(),
    "model": {"specs"},
    "cost": {"model", "specs"},
    "serving": {"cost", "model", "specs"},
    "search": {"serving", "cost", "model", "specs"},
    "design": {"search", "serving", "cost", "model", "specs"},
    "report": {"design", "search", "serving", "cost", "model", "specs"},
    "cli": {"report", "design", "search", "serving", "cost", "model", "specs"},
}
MAX_LINES = 600


def _modules():
    return sorted(p for p in ROOT.rglob("*.py"))


def _name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path):
    """(module imported, names imported) for every import statement in `path`."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, ()
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, tuple(a.name for a in node.names)


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "jaxplat" and parts[1] in MAY_IMPORT else None


def _graph():
    """{module: set of jaxplat modules it imports} (a `from pkg import sub` counts sub)."""
    mods = {_name(p): p for p in _modules()}
    graph = {}
    for name, path in mods.items():
        out = set()
        for target, names in _imports(path):
            if not target.startswith("jaxplat"):
                continue
            out.add(target)
            out.update(f"{target}.{n}" for n in names if f"{target}.{n}" in mods)
        graph[name] = out & set(mods)
    return graph


def test_every_module_is_in_a_package():
    # The top package and its `python -m jaxplat` entry point (which only runs cli.main) stand outside.
    loose = [_name(p) for p in _modules() if _package(_name(p)) is None and _name(p) not in ("jaxplat",
                                                                                            "jaxplat.__main__")]
    assert not loose, f"modules outside the layered packages: {loose}"


def test_arrows_point_down_only():
    back = []
    for mod, targets in _graph().items():
        mine = _package(mod)
        for t in targets:
            theirs = _package(t)
            if mine and theirs and theirs != mine and theirs not in MAY_IMPORT[mine]:
                back.append(f"{mod} -> {t}")
    assert not back, "imports against the layers: " + "; ".join(sorted(back))


def test_no_import_cycles_between_modules():
    graph = _graph()
    # A package's __init__ re-exports its modules; the cycle that matters is
    # between modules, so edges into a package __init__ of the same package are dropped.
    inits = {m for m in graph if (ROOT.parent / Path(*m.split("."))).is_dir()}
    edges = {m: {t for t in ts if t not in inits or _package(t) != _package(m)} for m, ts in graph.items()}
    state, cycles = {}, []

    def visit(m, stack):
        state[m] = "open"
        for t in sorted(edges.get(m, ())):
            if state.get(t) == "open":
                cycles.append(" -> ".join(stack[stack.index(t):] + [t]))
            elif t not in state:
                visit(t, stack + [t])
        state[m] = "done"

    for m in sorted(edges):
        if m not in state:
            visit(m, [m])
    assert not cycles, f"import cycles: {cycles}"


def test_module_size():
    big = {str(p.relative_to(ROOT)): n for p in _modules() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines (split them by concern): {big}"


def test_no_private_names_across_packages():
    leaks = []
    for path in _modules():
        mine = _package(_name(path))
        for target, names in _imports(path):
            theirs = _package(target)
            if theirs and theirs != mine:
                leaks += [f"{_name(path)}: {target}.{n}" for n in names if n.startswith("_")]
                if any(part.startswith("_") for part in target.split(".")[1:]):
                    leaks.append(f"{_name(path)}: {target}")
    assert not leaks, f"private names used across packages: {leaks}"
