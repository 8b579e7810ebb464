"""``python -m pycograd_xp.ops --matrix``: every op × rule kind, with the file and line that
declares each rule (the by-transform view for reviewers). ``--kind vjp`` keeps one column;
``--missing`` keeps the rows lacking a rule of some kind."""

from __future__ import annotations

import argparse

from .._primitive import REGISTRY, Primitive
from ._rules.jvp import TRANSPOSED

KINDS = ("row", "vjp", "jvp", "batch", "shape")


def cell(prim: Primitive, kind: str) -> str:
    """What a row has for one kind of rule, and where it was declared."""
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


def matrix(kinds: tuple[str, ...] = KINDS, missing: bool = False) -> str:
    rows = [("op", *kinds)]
    for name in sorted(REGISTRY):
        cells = tuple(cell(REGISTRY[name], k) for k in kinds)
        if not missing or "-" in cells:
            rows.append((name, *cells))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pycograd_xp.ops", description=__doc__)
    parser.add_argument("--matrix", action="store_true", help="op × rule kind, file:line each")
    parser.add_argument("--kind", choices=KINDS, action="append", help="only these columns")
    parser.add_argument("--missing", action="store_true", help="only rows lacking a rule")
    args = parser.parse_args(argv)
    if not (args.matrix or args.kind or args.missing):
        parser.print_help()
        return
    print(matrix(tuple(args.kind) if args.kind else KINDS, args.missing))


if __name__ == "__main__":
    main()
