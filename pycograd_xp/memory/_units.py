"""Bytes for people: ``format_bytes`` (three significant digits), ``parse_bytes`` (as Dask's)."""

from __future__ import annotations

import re

_UNITS = ("B", "kB", "MB", "GB", "TB", "PB")


def _sig3(v: float) -> int:
    """Decimals that show three significant figures of ``v`` (below 1000)."""
    v = abs(v)
    return 0 if v >= 99.95 else 1 if v >= 9.995 else 2


def _unit(n: float, decimals: int | None) -> int:
    """The unit ``n`` bytes read in: the largest whose figure does not round to 1000."""
    top = 999.5 if decimals is None else 1000 - 0.5 * 10.0**-decimals
    i = 0
    while i < len(_UNITS) - 1 and abs(n) >= top * 1000**i:
        i += 1
    return i


def format_bytes(n: float, *, decimals: int | None = None) -> str:
    """``n`` bytes in decimal units (kB = 1000 B, as Cubed's).

    Parameters
    ----------
    n : float
        A number of bytes.
    decimals : int, optional
        Fixed decimals ("152.3 MB", "1.0 MB" with ``decimals=1``); None: three significant
        figures ("152 MB", "1.23 GB", "60.0 MB").

    Returns
    -------
    str
        The figure and its unit; exact below 1 kB ("999 B").

    Examples
    --------
    >>> from pycograd_xp.memory import format_bytes
    >>> format_bytes(152_300_000), format_bytes(152_300_000, decimals=1), format_bytes(999)
    ('152 MB', '152.3 MB', '999 B')
    """
    i = _unit(n, decimals)
    if i == 0:
        return f"{n:.0f} B"
    v = n / 1000**i
    return f"{v:.{_sig3(v) if decimals is None else decimals}f} {_UNITS[i]}"


def format_byte_pair(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` as :func:`format_bytes` writes them, with more figures while they would read
    the same though they differ.

    In one unit (100.4 MB against 100 MB reads "100.4 MB" and "100.0 MB", never "100 MB" and
    "100 MB"); in bytes when only bytes tell them apart. For a figure compared with a limit in an
    error message.

    Parameters
    ----------
    a, b : float
        Two numbers of bytes.

    Returns
    -------
    tuple of str
        The two figures.
    """
    sa, sb = format_bytes(a), format_bytes(b)
    if sa != sb or a == b:
        return sa, sb
    i = _unit(max(abs(a), abs(b)), None)
    scale = 1000**i
    d = _sig3(max(abs(a), abs(b)) / scale)
    while 10**d < scale:
        d += 1
        sa, sb = f"{a / scale:.{d}f} {_UNITS[i]}", f"{b / scale:.{d}f} {_UNITS[i]}"
        if sa != sb:
            return sa, sb
    return f"{int(a):,} B", f"{int(b):,} B"


def _fmt(n: float) -> str:  # the report's columns: one decimal
    return format_bytes(n, decimals=1)


_BYTE_UNITS = {
    "": 1,
    "b": 1,
    **{p + "b": 1000**i for i, p in enumerate("kmgtp", 1)},
    **{p: 1000**i for i, p in enumerate("kmgtp", 1)},
    **{p + "ib": 1024**i for i, p in enumerate("kmgtp", 1)},
    **{p + "i": 1024**i for i, p in enumerate("kmgtp", 1)},
}


def parse_bytes(limit: int | float | str) -> int:
    """``limit`` as bytes, read as Dask's ``parse_bytes`` reads it.

    Parameters
    ----------
    limit : int, float or str
        A number, or a string: a number (``"1e5"``, ``"1.5"``) and a unit, any case, with or
        without a space: ``"2GB"``, ``"512 MiB"``, ``"100kB"``, ``"100KB"``, ``"150mb"``,
        ``"5k"`` (kB = 1000 B, KiB = 1024 B; no unit: bytes).

    Returns
    -------
    int
        The bytes.

    Raises
    ------
    ValueError
        If the string cannot be read, or the number is negative, infinite or NaN.
    """
    if isinstance(limit, int | float):
        if not 0 <= limit < float("inf"):
            raise ValueError(
                f"{limit!r} is not a number of bytes: give a size of 0 or more, such as 2e9 or "
                "'2 GB'"
            )
        return int(limit)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*", limit)
    scale = _BYTE_UNITS.get(m.group(2).lower()) if m else None
    if m is None or scale is None:
        raise ValueError(
            f"cannot read {limit!r} as a number of bytes: a number and a unit such as 2GB, "
            "512MiB, 100kB or 1e5 (no unit: bytes)"
        )
    return int(float(m.group(1)) * scale)
