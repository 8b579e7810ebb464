"""What an array says when it is used as NumPy's, PyTorch's or JAX's arrays are: the methods
those users try first and the standard's way to each, NumPy's ufuncs refused with the function
to call instead, and where SciPy is the one converting an array."""

from __future__ import annotations

from typing import Any

# The methods users of NumPy, PyTorch and JAX reach for, and the standard's way to each.
METHOD_WAYS = {
    **{
        n: f"call the namespace's function: xp.{n}(x) (xp = x.__array_namespace__())"
        for n in (
            "sum",
            "mean",
            "max",
            "min",
            "prod",
            "std",
            "var",
            "reshape",
            "exp",
            "log",
            "abs",
            "sqrt",
            "clip",
            "all",
            "any",
            "argmax",
            "argmin",
            "cumsum",
        )
    },
    "astype": "call xp.astype(x, dtype) (xp = x.__array_namespace__())",
    "transpose": "use x.T or x.mT, or xp.permute_dims(x, axes)",
    "flatten": "call xp.reshape(x, (-1,))",
    "ravel": "call xp.reshape(x, (-1,))",
    "copy": "call xp.asarray(x, copy=True)",
    "item": "use float(x) or int(x) (on an array being differentiated: float(x.detach()))",
    "tolist": "use numpy.asarray(x).tolist() (on an array being differentiated: of x.detach())",
    "numpy": "use numpy.asarray(x) (on an array being differentiated: numpy.asarray(x.detach()))",
    "cpu": "arrays live on their backend's device; see x.device and x.to_device(...)",
}


# NumPy ufunc (and reduction) names whose Array API name differs.
_NUMPY_NAMES = {
    "add.reduce": "sum",
    "multiply.reduce": "prod",
    "maximum.reduce": "max",
    "minimum.reduce": "min",
    "logical_and.reduce": "all",
    "logical_or.reduce": "any",
    "add.accumulate": "cumulative_sum",
    "multiply.accumulate": "cumulative_prod",
    "true_divide": "divide",
    "power": "pow",
    "absolute": "abs",
    "arctan2": "atan2",
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "arcsinh": "asinh",
    "arccosh": "acosh",
    "arctanh": "atanh",
    "conjugate": "conj",
    "invert": "bitwise_invert",
    "left_shift": "bitwise_left_shift",
    "right_shift": "bitwise_right_shift",
    "mod": "remainder",
}


def numpy_refusal(ns: Any, ufunc: Any, method: str) -> TypeError:
    """The error for NumPy's ``ufunc`` (``method``: ``"__call__"``, ``"reduce"``, ...) given an
    array of the namespace ``ns`` that does not answer NumPy's protocols."""
    name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
    ours = _NUMPY_NAMES.get(name, ufunc.__name__ if method == "__call__" else None)
    where = ns.__name__
    if ours is not None and callable(getattr(ns, ours, None)):
        way = (
            f"Use {where}.{ours}(...) (xp.{ours}), and convert NumPy arrays with "
            "xp.asarray(...) first"
        )
    else:
        way = (
            f"{where} has no function for it: compute it with xp functions, or on the values "
            "with numpy.asarray(pycograd_xp.stop_gradient(x)) (no gradient)"
        )
    return TypeError(
        f"numpy.{name}() was given an array of {where}; NumPy functions do not take these "
        f"arrays. {way}"
    )


def scipy_hint(what: str = "") -> str:
    """Where SciPy (without its array API mode) is converting a differentiated array, what
    makes it take the array as it is; else nothing. Only on the error's path: it walks up to 16
    frames."""
    import os
    import sys

    if os.environ.get("SCIPY_ARRAY_API") == "1":
        return ""
    frame: Any = sys._getframe(2)
    for _ in range(16):
        if frame is None:
            break
        if str(frame.f_globals.get("__name__", "")).startswith("scipy."):
            if what:  # a traced array: the same switch lets SciPy call our namespace's functions
                return (
                    ". SciPy converts it here: its functions that support the array API "
                    "(scipy.special's, logsumexp) take pycograd_xp arrays as they are, and so "
                    "can be projected, when SCIPY_ARRAY_API=1 is set before SciPy is first "
                    "imported"
                )
            return (
                ". SciPy converts it here: its functions that support the array API "
                "(scipy.special's, logsumexp, some of scipy.stats) take pycograd_xp arrays as "
                "they are when SCIPY_ARRAY_API=1 is set before SciPy is first imported; the "
                "others (scipy.stats' distributions) always convert"
            )
        frame = frame.f_back
    return ""
