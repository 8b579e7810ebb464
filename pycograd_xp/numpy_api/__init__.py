"""NumPy's own functions on our arrays: ``__array_ufunc__`` (NEP 13) and ``__array_function__``
(NEP 18) of the arrays of a namespace over NumPy (issue 19).

``np.exp(x)``, ``np.add.reduce(x, axis=0)``, ``np.einsum('ij,jk->ik', a, b)``,
``np.linalg.norm(x, ord=1)``, ``np.nanmean(x)``: NumPy hands the call to the array, and the array
answers with its namespace's functions, so the gradient flows through the rows' rules. The
tables below are data: :data:`UFUNCS` (a ufunc's ``__call__``), :data:`REDUCTIONS` and
:data:`ACCUMULATIONS` (its ``reduce`` and ``accumulate``; ``outer`` and ``at`` work for every
mapped ufunc), :data:`FUNCTIONS` (NumPy's functions, by their name under ``numpy``:
``"concatenate"``, ``"linalg.norm"``, ``"fft.rfft"``); each entry is the name of a function of
our namespace or a composition of them with NumPy's argument conventions translated.
:func:`covered` lists them (``python -m pycograd_xp.ops --numpy``).

Which calls go where:

* every argument of ours holds NumPy data that no gradient flows through (nothing is being
  differentiated, traced or batched): NumPy computes the call itself on the unwrapped arrays, and
  the arrays (and NumPy scalars) it returns come back as arrays of our namespace; the call
  behaves exactly as NumPy's, mapped or not;
* otherwise a mapped function runs on our namespace (with its gradient); NumPy arrays and NumPy
  scalars among the arguments become constants of the namespace (NumPy 2's rules: a NumPy scalar
  is typed, a Python number is not);
* a function with no mapping refuses with a TypeError naming it and the way out:
  ``pycograd_xp.stop_gradient(x)`` (NumPy's own result, with no gradient) or the namespace's
  function to use, where one exists. Nothing loses a gradient silently.

Functions whose result carries no gradient whatever their inputs (``allclose``,
``array_equal``, ``isclose``, ``shape``, ...) compare the values (``stop_gradient`` semantics) and
answer as NumPy does.

``out=`` is honoured as our in-place operators are: the result is written into ``out`` through
the namespace's ``x[...] = value`` (in place when no tape can see the buffer, else ``out`` is
rebound to the new value and the write recorded), so ``np.add(a, b, out=a)`` is ``a += b``. A
leaf that requires grad refuses, as ``x += 1`` does: its gradient would be lost. A NumPy array
given as ``out`` refuses a result being differentiated. ``ufunc.at(x, idx, v)`` writes through
the same path, one ``x[k] = ufunc(x[k], v)`` per round of distinct indices, so duplicate indices
accumulate in order, as NumPy's unbuffered ``at`` does.

The ufuncs of other libraries (scipy.special's ``erf``, ...) reach the same ``__array_ufunc__``;
an ops module that declares rows for them registers its table with :func:`register_ufuncs`
(``ufunc.__name__`` -> row name), looked up only for ufuncs that are not NumPy's own.

The package, by NumPy's own grouping: :mod:`._dispatch` (the protocols and their tables),
:mod:`.ufuncs` (ufuncs without a row of their own), :mod:`.reductions`, :mod:`.elementwise`,
:mod:`.manipulation`, :mod:`.sorting`, :mod:`.linalg`, :mod:`.fft`, :mod:`.statistics`,
:mod:`.lib` (``pad``, ``interp``, ``gradient``, polynomials, ...), :mod:`._names` (NumPy's names on
the namespace module), with :mod:`._convert` beneath them all. It is a client of the namespace
(the toolkit layer); it plugs into the namespaces over NumPy through
:mod:`pycograd_xp.namespace._frontend` when imported.
"""

from __future__ import annotations

from ..namespace._frontend import FOREIGN_UFUNCS, plug_numpy_frontend, register_ufuncs
from . import (  # noqa: F401  (each fills the tables of _dispatch with its functions)
    elementwise,
    fft,
    lib,
    linalg,
    manipulation,
    reductions,
    sorting,
    statistics,
    ufuncs,
)
from ._dispatch import (
    ACCUMULATIONS,
    FUNCTIONS,
    REDUCTIONS,
    UFUNCS,
    VALUE_FUNCTIONS,
    array_function,
    array_ufunc,
    covered,
    install,
)
from ._names import numpy_names

__all__ = [
    "ACCUMULATIONS",
    "FOREIGN_UFUNCS",
    "FUNCTIONS",
    "REDUCTIONS",
    "UFUNCS",
    "VALUE_FUNCTIONS",
    "array_function",
    "array_ufunc",
    "covered",
    "install",
    "numpy_names",
    "register_ufuncs",
]

plug_numpy_frontend(install, numpy_names)
