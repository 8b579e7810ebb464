"""``python -m pycograd_xp.ops --matrix``: every op × rule kind, with the file and line that
declares each rule (the by-transform view for reviewers), then one column per backend whose
adapter implements some rows' backend calls itself (``cubed``: Cubed's block implementations in
``cubed_plugin``), with the file and line of each implementation, blank where the backend's own
namespace has the function.

The matrix loads every adapter installed under the ``pycograd_xp.adapters`` entry-point group
first (installing ``cubed_plugin``, as ``pip install -e ".[cubed]"`` does, is enough for the
``cubed`` column; Cubed itself is not imported). ``--kind vjp`` keeps one column (a rule kind
or a backend's label, repeatable); ``--missing`` keeps the rows lacking a rule of some kind.

``--numpy`` lists what NumPy code reaches on arrays of ``namespace(numpy)`` with gradients
(``numpy.exp -> xp.exp``; a NumPy name alone is a composition of our functions), generated from
the tables of ``numpy_api/_dispatch.py``."""

from __future__ import annotations

import argparse

from .._primitive import IMPLEMENTATIONS, REGISTRY, Primitive, implemented_backends
from ..namespace._backend import load_adapters
from ..numpy_api import covered
from ._rules.jvp import TRANSPOSED

KINDS = ("row", "vjp", "jvp", "batch", "shape")


def cell(prim: Primitive, kind: str) -> str:
    """What a row has for one kind of rule, and where it was declared; for a backend's label,
    where that backend's implementation of the row's backend call is (blank: none)."""
    if kind not in KINDS:
        impl = IMPLEMENTATIONS.get((prim, kind))
        return impl.site if impl is not None else ""
    site = prim.sites.get(kind, "")
    if kind == "vjp" and prim.nondiff:
        return f"nondifferentiable {site}"
    if kind == "jvp" and prim.nondiff:
        return "n/a"
    if kind == "jvp" and prim.jvp is TRANSPOSED:
        return f"from the vjp {site}"
    if kind == "batch" and prim.unbatchable is not None:
        return f"cannot batch {site}"
    if kind != "row" and not site:
        return "-"
    return site


def matrix(kinds: tuple[str, ...] | None = None, missing: bool = False) -> str:
    """The table: ``kinds`` are its columns, rule kinds and backend labels (default: every rule
    kind, then every backend with registered implementations); ``missing`` keeps the rows
    lacking a rule of one of the rule kinds shown."""
    if kinds is None:
        kinds = KINDS + implemented_backends()
    rows = [("op", *kinds)]
    for name in sorted(REGISTRY):
        cells = tuple(cell(REGISTRY[name], k) for k in kinds)
        if not missing or any(c == "-" for c, k in zip(cells, kinds, strict=True) if k in KINDS):
            rows.append((name, *cells))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def numpy_table() -> str:
    """The NumPy ufuncs, ufunc methods and functions with a rule on our arrays, by kind."""
    titles = {
        "ufuncs": "ufuncs (__call__, outer, at; out= and where= honoured)",
        "ufunc.reduce": "ufunc.reduce",
        "ufunc.accumulate": "ufunc.accumulate",
        "functions": "functions (__array_function__)",
        "values": "functions computed on the values (no gradient flows through their result)",
    }
    lines = []
    for kind, names in covered().items():
        lines.append(f"{titles[kind]}: {len(names)}")
        for n in names:
            name, _, ours = n.partition(" -> ")
            lines.append(f"  numpy.{name}" + (f" -> xp.{ours}" if ours else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pycograd_xp.ops", description=__doc__)
    parser.add_argument(
        "--matrix", action="store_true", help="op × rule kind and backend, file:line each"
    )
    parser.add_argument(
        "--kind", action="append", help=f"only these columns: {', '.join(KINDS)} or a backend"
    )
    parser.add_argument("--missing", action="store_true", help="only rows lacking a rule")
    parser.add_argument(
        "--numpy", action="store_true", help="NumPy's ufuncs and functions that reach the rows"
    )
    args = parser.parse_args(argv)
    if args.numpy:
        print(numpy_table())
        return
    if not (args.matrix or args.kind or args.missing):
        parser.print_help()
        return
    load_adapters()
    columns = KINDS + implemented_backends()
    for k in args.kind or ():
        if k not in columns:
            parser.error(
                f"--kind {k}: not a rule kind ({', '.join(KINDS)}) nor a backend with "
                f"implementations ({', '.join(implemented_backends()) or 'none installed'})"
            )
    print(matrix(tuple(args.kind) if args.kind else columns, args.missing))


if __name__ == "__main__":
    main()
