"""Cubed's namespace, completed: every attribute of ``cubed`` plus what Cubed 0.27 lacks.

:func:`augmented` returns one module-like object (created once, the same object every time)
named ``cubed`` that forwards every attribute to the ``cubed`` module and adds:

- ``sort``, ``argsort``, ``take_along_axis``: one NumPy call per block holding the sorted axis
  whole (:mod:`cubed_plugin._sorting`);
- ``fft``: the whole ``fft`` extension (:mod:`cubed_plugin._fft`);
- ``linalg``: Cubed's own ``linalg`` plus ``inv``, ``solve``, ``cholesky``, ``det``,
  ``slogdet``, ``eigh``, ``eigvalsh``, ``eig``, ``eigvals``, ``pinv``, ``matrix_power``,
  ``matrix_rank``, ``cross``, ``matrix_norm``, ``vector_norm``, ``trace``, ``diagonal``, and
  ``svd``/``svdvals`` for stacks (:mod:`cubed_plugin._linalg`).

Each of these is registered against its row (``@implements("linalg.inv")``,
:func:`cubed_plugin._blocks.implements`), and the namespace is built from the table's
implementations for ``"cubed"`` (``pycograd_xp._primitive.IMPLEMENTATIONS``), each at the
backend attribute its row calls: the row is where its Cubed implementation is found, and
``python -m pycograd_xp.ops --matrix`` shows it in the ``cubed`` column.

Every backend function a row calls (its ``needs``) is wrapped by
:func:`cubed_plugin._operands.aligned`: its Cubed operands are brought to one ``Spec`` (a
constant made with Cubed's default takes the user's) and, for ``stack`` and ``concat``, whose
Cubed implementations trust one operand's chunks for the others, to one chunking.

Functions that need some axes whole (the transformed axes, the sorted axis, the two matrix axes)
rechunk their input so that those axes are one chunk when a block then fits one task's memory
(``allowed_mem``), and otherwise raise :class:`NotImplementedError` naming the chunking and
memory that would work (see :mod:`cubed_plugin._blocks`). Everything stays lazy.

``cubed_plugin.adapt`` puts this object in the :class:`~pycograd_xp.namespace.Backend` as
``xp``, so pycograd_xp's namespace rows and first-order VJP rules reach these functions.

Making it also starts :func:`label_ops`: every Cubed op created from then on says which part of
the user's program built it ("matmul in mlp_loss (backward of tanh)"), so that a refusal or a
measured overrun can name it; Cubed's own names (``op-007``) change from one build to the next.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
from types import FunctionType, ModuleType
from typing import Any

from pycograd_xp.namespace import REGISTRY, implementations, row_of

# importing them registers their functions as Cubed's implementations of rows (they import
# NumPy, not Cubed)
from . import _fft, _linalg, _sorting, _standard  # noqa: F401
from ._blocks import BACKEND
from ._operands import aligned

# the attribute of a Cubed op node holding :func:`label_ops`'s label
LABEL = "pycograd_xp_part"


class Forwarding(ModuleType):
    """A module holding its own functions and forwarding every other attribute to ``base``."""

    def __init__(self, name: str, base: Any, doc: str | None = None) -> None:
        super().__init__(name, doc)
        self.__dict__["_base"] = base

    def __getattr__(self, name: str) -> Any:  # called only for names not set on self
        if name == "_base":
            raise AttributeError(name)
        return getattr(self.__dict__["_base"], name)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self.__dict__["_base"])) | set(self.__dict__))

    def __repr__(self) -> str:
        return f"<namespace {self.__name__!r} (cubed, completed by cubed_plugin)>"


@functools.cache
def augmented() -> ModuleType:
    """The completed Cubed namespace (one object per process)."""
    import cubed

    linalg = Forwarding(
        "cubed.linalg", cubed.linalg, "Cubed's linalg, completed by cubed_plugin._linalg."
    )
    fft = ModuleType("cubed.fft", "The fft extension over Cubed (cubed_plugin._fft).")
    ns = Forwarding("cubed", cubed, cubed.__doc__)
    ns.__dict__.update(
        __array_api_version__=cubed.__array_api_version__,
        __array_namespace_info__=cubed.__array_namespace_info__,
        linalg=linalg,
        fft=fft,
    )
    scopes = {"": ns, "linalg": linalg, "fft": fft}
    for impl in implementations(BACKEND):
        scope, _, name = impl.attribute.rpartition(".")
        setattr(scopes[scope], name, impl.fn)
    # every function a row calls gets its operands on one Spec and, where Cubed needs it, one
    # chunking (cubed_plugin._operands)
    for attribute in sorted({a for row in REGISTRY.values() for a in row.needs}):
        scope, _, name = attribute.rpartition(".")
        fn = getattr(scopes[scope], name, None)
        if isinstance(fn, FunctionType):
            setattr(scopes[scope], name, aligned(attribute, fn))
    label_ops()
    return ns


# -- which part of the program built each Cubed op ------------------------------------------------

_LIBRARY = ("cubed", "pycograd_xp", "cubed_plugin")
_LIB_PATHS = tuple(
    {sysconfig.get_path("stdlib"), sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    - {None}
)


@functools.cache
def label_ops() -> None:
    """From now on, label every Cubed op when it is created with the part of the program that
    built it (node attribute ``LABEL`` of the op in Cubed's plan; read by
    :func:`cubed_plugin.memory.part_of`):

    - ``"matmul in mlp_loss (backward of tanh)"``: made by the VJP rule of ``tanh`` while
      differentiating ``mlp_loss`` (the function given to ``grad``/``value_and_grad``/``vjp``);
    - ``"tanh in mlp_loss (forward, model.py:12 in layer)"``: the forward call of ``xp.tanh``,
      and the innermost line of user code that made it;
    - ``"blockwise in the one-pass step of mlp_loss (...)"``: one-pass mode's ops;
    - ``"rechunk (prepare.py:30 in load)"``: an op the user's own code made with Cubed.

    Cubed records where each op was made only as its first ten frames, without their
    variables, which is not enough to name a VJP rule; this wraps its op constructor (the
    classmethod ``cubed.core.plan.Plan._new``, through which every op is created) to read the
    Python stack once, when the op is made (:func:`cubed_plugin._cubed_seam.install_op_hook`).
    Nothing else of the plan changes."""
    from ._cubed_seam import install_op_hook

    install_op_hook(_label)


def _label(dag: Any, op: str, frame: Any) -> None:
    from ._cubed_seam import node_func, node_mark, set_node_mark

    if node_mark(dag, op, LABEL) is None:
        set_node_mark(dag, op, LABEL, _origin(frame, node_func(dag, op)))


def _library(frame: Any) -> bool:
    name = frame.f_globals.get("__name__") or ""
    path = frame.f_code.co_filename
    return name.split(".")[0] in _LIBRARY or path.startswith(_LIB_PATHS) or path.startswith("<")


def _fn_name(f: Any) -> str:
    name = getattr(f, "__name__", None) or getattr(getattr(f, "per_row", None), "__name__", None)
    return name or type(f).__name__


# the plugin's functions whose frames label the ops made under them: (module, name), looked up
# among the modules already imported (a frame of one is on the stack only once it is), and
# compared by code object (tests/test_cubed_minibatch.py imports each where it is named here)
_FRAMES = {
    "one_pass_step": ("cubed_plugin.steps", "one_pass_step"),
    "_take_chunks": ("cubed_plugin._fit_steps", "_take_chunks"),
}


def _plugin_code(name: str) -> Any:
    """The code object of the plugin's function ``name`` (None while its module is not
    imported)."""
    module, attribute = _FRAMES[name]
    return getattr(getattr(sys.modules.get(module), attribute, None), "__code__", None)


def _origin(frame: Any, func: str) -> str:
    """The label of an op Cubed's function ``func`` is making, from the stack at ``frame``."""
    func = func.strip("_") or func
    prim = rule = loss = where = None
    seed = one_pass = batch = False
    f = frame
    while f is not None:
        module, code = f.f_globals.get("__name__") or "", f.f_code
        if module == "pycograd_xp._tape":
            if code.co_name == "_run_rule" and rule is None:
                rule = getattr(f.f_locals.get("node"), "name", None)
            elif code.co_name == "backward":
                seed = True
        elif module == "pycograd_xp._api" and code.co_name in ("wrapped", "vjp"):
            loss = _fn_name(f.f_locals.get("f"))
            break
        elif code is _plugin_code("one_pass_step"):
            one_pass, loss = True, _fn_name(f.f_locals.get("loss"))
            break
        elif code is _plugin_code("_take_chunks"):
            batch = True
        elif rule is None and not seed:
            row = row_of(f)  # a public function of one of our namespaces
            if row is not None:
                prim = row.name
            elif where is None and not _library(f):
                where = f"{os.path.basename(code.co_filename)}:{f.f_lineno} in {code.co_qualname}"
        f = f.f_back
    of = f" in {loss}" if loss else ""
    if one_pass:
        part = {
            "blockwise": "forward and backward of each row chunk",
            "arange": "the row numbers of each chunk",
        }.get(func, "the sum of the chunks' partial loss and gradients")
        return f"{func} in the one-pass step of {loss} ({part})"
    if batch:
        return f"{func} of fit's mini-batch of row chunks"
    if rule is not None:
        return f"{func}{of} (backward of {rule})"
    if seed:
        return f"{func}{of} (backward: the seed cotangent)"
    if prim is not None:
        head = prim if func == prim else f"{func} of {prim}"
        return f"{head}{of} (forward{', ' + where if where else ''})"
    return f"{func} ({where})" if where else func
