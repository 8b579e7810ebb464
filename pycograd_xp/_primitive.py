"""The primitive table: one row per function of the standard.

A row (:class:`Primitive`) says everything the package knows about one function: its spec name,
how to call the backend (``impl``), which dtypes its array arguments accept, and which backend
names it needs. The namespace factory turns every row into a public function of each namespace;
every transform reads the same row for its rule (VJP, JVP, batching, shape and memory), which
the row's block in :mod:`pycograd_xp.ops` attaches with the row's methods (``row.defvjp`` ...).
Importing ``pycograd_xp.ops`` declares every row and then freezes them all.

The ops modules declare rows with the decorators below:

* :func:`unary` / :func:`binary` for elementwise functions. Their public signatures are
  ``(x, /)`` and ``(x1, x2, /)``; they get a hand-tuned fast path because they are the hot ones.
* :func:`primitive` for everything else. The decorated ``impl(bk, ...)`` takes the backend
  namespace first and then exactly the spec signature; the public function has that signature
  minus ``bk``, and receives the backend arrays unwrapped. The impl's annotations say which
  parameters hold arrays: :data:`Array` (an array, or a plain value the backend takes in its
  place: a Python scalar, a dtype) and :data:`Arrays` (a list or tuple of arrays); the namespace
  unwraps, checks and tracks those, and passes every other argument to the backend as given.

A backend adapter may supply its own function for the backend call of a row (Cubed's block-wise
``sort``, which Cubed lacks): ``row.implement(backend, fn)`` registers it in
:data:`IMPLEMENTATIONS` under the backend's label (its short name), frozen rows or not; the
adapter builds its completed namespace from :func:`implementations`, and the ``--matrix`` view
shows where each one is. The table keeps them and knows nothing else of the backend.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FunctionType, ModuleType
from typing import Annotated, Any, ClassVar, TypeVar

# Dtype categories of the standard, as ``isdtype`` kinds.
CATEGORIES: dict[str, tuple[str, ...]] = {
    "all": ("bool", "integral", "real floating", "complex floating"),
    "numeric": ("numeric",),
    "real numeric": ("integral", "real floating"),
    "integer": ("integral",),
    "integer or boolean": ("integral", "bool"),
    "boolean": ("bool",),
    "real floating-point": ("real floating",),
    "complex floating-point": ("complex floating",),
    "floating-point": ("real floating", "complex floating"),
}

# Functions of the main namespace that the linalg extension re-exports (rows declared once).
LINALG_ALIASES = ("matmul", "matrix_transpose", "tensordot", "vecdot")

# The standard's dtypes and constants, by name.
DTYPE_NAMES = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "complex64",
    "complex128",
)
CONSTANTS = ("e", "inf", "nan", "newaxis", "pi")

F = TypeVar("F", bound=Callable[..., Any])

# The annotations of an impl's parameters that hold arrays (see the module docstring): to a type
# checker they are Any; :func:`primitive` reads them into ``Primitive.arrays``.
Array = Annotated[Any, "array"]
Arrays = Annotated[Any, "a list or tuple of arrays"]


class Shared(tuple):
    """``needs=`` (a tuple of positions) where positions of the rule share one tape parent:
    the same tracked array twice, as in ``x * x``. Only the tape knows: two different inputs
    over one backend array are as identical to the rule (``x1 is x2``), and each must get its
    own cotangent."""

    __slots__ = ()


@dataclass(eq=False)
class Primitive:
    """One function of the standard.

    ``name`` is the spec name, qualified for extensions (``"linalg.cholesky"``). ``kind`` is
    ``"unary"``, ``"binary"`` or ``"general"``. ``impl(bk, *args, **kwargs)`` calls the backend
    ``bk`` on backend arrays; for elementwise rows it may be None, meaning "the backend function
    of the same name". ``dtypes`` is a key of :data:`CATEGORIES` that every array argument must
    satisfy (None: no check). ``needs`` are the backend attributes (dotted for extensions) the
    row calls; a backend missing one gets a function that raises NotImplementedError.
    ``axis_check`` validates an ``axis`` argument against the first argument's rank.
    ``arrays`` names the parameters that hold arrays (annotated :data:`Array` or :data:`Arrays`
    in the impl; the ``*args`` parameter's name stands for each of them), ``lists`` those of
    them that hold a list of arrays; the namespace unwraps, checks and tracks only those.
    """

    name: str
    kind: str
    impl: Callable[..., Any] | None
    dtypes: str | None
    needs: tuple[str, ...]
    axis_check: bool = False
    signature: inspect.Signature | None = None
    arrays: frozenset[str] = frozenset()
    lists: frozenset[str] = frozenset()
    # Every rule below is attached by the row's block in pycograd_xp.ops.
    # Autodiff: the VJP rule, the arguments it saves for backward (parameter names, or "out"),
    # keyword arguments that are differentiable, and whether the function is declared
    # non-differentiable.
    vjp: Callable[..., Any] | None = None
    saves: frozenset[str] = frozenset()
    diff_kwargs: tuple[str, ...] = ()
    nondiff: bool = False
    takes_needs: bool = False  # the rule accepts needs= (positions whose cotangent is wanted)
    takes_owned: bool = False  # the rule accepts owned= (it may write into the cotangent)
    # Forward mode: ``jvp(ns, tangents, out, *args, **kwargs)`` gives the output's tangent from
    # one tangent per positional argument (then per name in ``diff_kwargs``; None: zero).
    jvp: Callable[..., Any] | None = None
    # Abstract evaluation: ``shape(a, *args, **kwargs)`` gives the output(s) as abstract arrays
    # of the abstract backend ``a``, from shapes and dtypes only; ``memory(out, *args,
    # **kwargs)`` the bytes the backend call allocates beyond its output(s) while it runs (its
    # transients; None: none).
    shape: Callable[..., Any] | None = None
    memory: Callable[..., int] | None = None
    # Batching: ``batch(ns, dims, *args, **kwargs)`` runs the row on arrays of the inner
    # namespace ``ns`` whose batch axis is 0, where ``dims[i]`` says whether positional
    # argument i is batched (a list of them for a list argument); it returns the output(s),
    # batched along axis 0. ``unbatchable``: why vmap cannot batch it.
    batch: Callable[..., Any] | None = None
    unbatchable: str | None = None
    # Where the row and each of its rules were declared ("ops/statistical/cumulative.py:97", by
    # kind: "row", "vjp", "jvp", "batch", "shape"): ``python -m pycograd_xp.ops --matrix`` prints
    # them.
    sites: dict[str, str] = field(default_factory=dict, repr=False)
    _frozen: ClassVar[bool] = False  # set per row by freeze()

    @functools.cached_property
    def arg_names(self) -> tuple[str, ...]:
        """Names of the positional parameters, in order (what ``saves`` refers to)."""
        if self.kind == "unary":
            return ("x",)
        if self.kind == "binary":
            return ("x1", "x2")
        assert self.signature is not None
        kinds = (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.VAR_POSITIONAL,
        )
        return tuple(p.name for p in self.signature.parameters.values() if p.kind in kinds)

    @property
    def scope(self) -> str:
        return self.name.rpartition(".")[0]

    @property
    def short_name(self) -> str:
        return self.name.rpartition(".")[2]

    # -- attaching the rules (in the row's block of its ``pycograd_xp.ops`` module) -------------
    # Each attaches once (a second declaration is an error) and returns the rule, so a method
    # can be a decorator: ``@sum.defvjp(saves=("x",))`` above ``def _(ns, g, out, x, ...)``.

    def __setattr__(self, name: str, value: Any) -> None:
        if self._frozen:
            raise AttributeError(
                f"{self.name}: rows are frozen once pycograd_xp.ops is imported; declare rules "
                "in the row's block of its ops module"
            )
        object.__setattr__(self, name, value)

    @contextlib.contextmanager
    def replaced(self, **attrs: Any) -> Iterator[Primitive]:
        """Within the block, the row has these attributes instead (``vjp=spy``): for a test or a
        benchmark that swaps a rule on a frozen row. Restored on exit."""
        old = {k: getattr(self, k) for k in attrs}
        try:
            for k, v in attrs.items():
                object.__setattr__(self, k, v)
            yield self
        finally:
            for k, v in old.items():
                object.__setattr__(self, k, v)

    def defvjp(
        self,
        rule: Callable[..., Any] | None = None,
        /,
        *,
        saves: tuple[str, ...] = (),
        diff_kwargs: tuple[str, ...] = (),
        takes_needs: bool = False,
        takes_owned: bool = False,
    ) -> Any:
        """Attach the VJP ``rule(ns, g, out, <the function's arguments>)``.

        ``saves`` names the arguments (or ``"out"``) the rule reads data from; the tape keeps
        only those. The rule returns one cotangent per positional argument (None for no
        gradient), then one per name in ``diff_kwargs``. With ``takes_needs`` the rule also gets
        ``needs=``, the set of argument positions whose cotangent is wanted, and may return None
        for the others (a matmul with a constant operand then does one product instead of two);
        a :class:`Shared` when two of those positions are one tape parent (``x * x``), so the
        rule may return their sum at the first and None at the others.
        With ``takes_owned`` it gets ``owned=``: True when the cotangent ``g`` is a backend array
        that owns its memory and that nothing but the backward pass references (the tape
        checks), so the rule may write its result into ``g`` and return it (relu's VJP: no
        second array of the layer's size). A row of several outputs gets one flag per output,
        a tuple (layer norm's VJP writes into its first output's cotangent); a higher-order
        pass (``create_graph``) passes False.
        """
        if rule is None:
            return lambda r: self.defvjp(
                r,
                saves=saves,
                diff_kwargs=diff_kwargs,
                takes_needs=takes_needs,
                takes_owned=takes_owned,
            )
        if self.vjp is not None or self.nondiff:
            raise RuntimeError(f"{self.name}: derivative declared twice")
        self.vjp, self.saves, self.diff_kwargs = (
            _named(rule, self.name, "vjp"),
            frozenset(saves),
            diff_kwargs,
        )
        self.takes_needs, self.takes_owned = takes_needs, takes_owned
        self.sites["vjp"] = _site()
        return rule

    def defjvp(self, rule: Callable[..., Any]) -> Any:
        """Attach the JVP ``rule(ns, tangents, out, <the function's arguments>)``.

        ``tangents`` holds one tangent per positional argument (a list for a list argument),
        then one per name in the row's ``diff_kwargs``; None stands for a zero tangent (a
        constant or a Python scalar), and at least one is not None. The rule returns the
        output's tangent (a tuple for several outputs, None for a zero one); the engine
        broadcasts it to the output's shape and dtype.
        """
        if self.jvp is not None:
            raise RuntimeError(f"{self.name}: JVP rule declared twice")
        self.jvp = _named(rule, self.name, "jvp")
        self.sites["jvp"] = _site()
        return rule

    def nondifferentiable(self) -> None:
        """Declare that the outputs carry no gradient (integer/boolean results, constants)."""
        if self.vjp is not None or self.nondiff:
            raise RuntimeError(f"{self.name}: derivative declared twice")
        self.nondiff = True
        self.sites["vjp"] = _site()

    def defshape(
        self, rule: Callable[..., Any], *, memory: Callable[..., int] | None = None
    ) -> Any:
        """Attach the abstract-evaluation ``rule(a, <the function's arguments>)`` (and the bytes
        of its transients, ``memory(out, <arguments>)``)."""
        if self.shape is not None:
            raise RuntimeError(f"{self.name}: shape rule declared twice")
        self.shape, self.memory = _named(rule, self.name, "shape"), memory
        self.sites["shape"] = _site()
        return rule

    def defbatch(self, rule: Callable[..., Any]) -> Any:
        """Attach the batching ``rule(ns, dims, <the function's arguments>)`` (see the class
        docstring; pycograd_xp.vmap calls it when an argument is batched)."""
        if self.batch is not None or self.unbatchable is not None:
            raise RuntimeError(f"{self.name}: batching rule declared twice")
        self.batch = _named(rule, self.name, "batch")
        self.sites["batch"] = _site()
        return rule

    def cannot_batch(self, reason: str) -> None:
        """Declare that vmap cannot batch this row, and why (the error vmap raises names the row
        and gives ``reason``)."""
        if self.batch is not None or self.unbatchable is not None:
            raise RuntimeError(f"{self.name}: batching rule declared twice")
        self.unbatchable = reason
        self.sites["batch"] = _site()

    # -- a backend's own function for the row's backend call (registered by its adapter) -------
    # Not a rule: data an adapter adds at any time, rows frozen or not (see IMPLEMENTATIONS).

    def implement(self, backend: str, fn: F | None = None, /) -> Any:
        """Register ``fn`` as backend ``backend``'s own function for the one backend function
        this row calls (``needs[0]``, dotted for an extension: ``"linalg.inv"``), where the
        backend lacks it. ``backend`` is a label, the backend's short name (``Backend.name``);
        its adapter puts ``fn`` in the namespace it hands the rows (:func:`implementations`).
        A second registration for the same row and backend raises. Returns ``fn``, so that
        ``@row.implement("mybackend")`` can decorate it."""
        if fn is None:
            return lambda f: self.implement(backend, f)
        if REGISTRY.get(self.name) is not self:
            raise ValueError(f"{self.name}: not a row of the table")
        if len(self.needs) != 1:
            raise ValueError(
                f"{self.name}: the row calls {len(self.needs)} backend functions "
                f"{self.needs}, not one, so a backend's implementation of it has no place"
            )
        first = IMPLEMENTATIONS.get((self, backend))
        if first is not None:
            raise RuntimeError(
                f"{self.name}: a {backend!r} implementation is registered twice ({first.site} "
                f"and {_source_site(fn)})"
            )
        IMPLEMENTATIONS[(self, backend)] = Implementation(self, backend, fn, _source_site(fn))
        return fn


REGISTRY: dict[str, Primitive] = {}


@dataclass(frozen=True)
class Implementation:
    """A backend's own function for a row's backend call, registered by the backend's adapter
    with :meth:`Primitive.implement`: ``fn`` stands for the backend attribute ``attribute``
    (the row's one ``needs``) in the namespace the adapter hands the rows. ``site`` is where
    ``fn`` is defined (``cubed_plugin/_linalg.py:128``, relative to the folder holding its
    top-level package)."""

    row: Primitive
    backend: str
    fn: Callable[..., Any]
    site: str

    @property
    def attribute(self) -> str:
        return self.row.needs[0]


# Every backend implementation, by (row, backend label): filled by the adapters, rows frozen or
# not; at most one per row and backend.
IMPLEMENTATIONS: dict[tuple[Primitive, str], Implementation] = {}


def implementations(backend: str) -> list[Implementation]:
    """The implementations registered for ``backend``, in the table's order of rows."""
    return [
        IMPLEMENTATIONS[(row, backend)]
        for row in REGISTRY.values()
        if (row, backend) in IMPLEMENTATIONS
    ]


def implemented_backends() -> tuple[str, ...]:
    """The labels of the backends with at least one registered implementation, sorted."""
    return tuple(sorted({b for _, b in IMPLEMENTATIONS}))


_PACKAGE = os.path.dirname(os.path.abspath(__file__))

# the names a rule written inline or made by a kit has: a traceback through one says which row's
_ANONYMOUS = frozenset({"<lambda>", "_", "rule", "vjp", "jvp", "batch", "shape"})


def _named(rule: Any, row: str, kind: str) -> Any:
    """``rule``, named ``<row>.<kind>`` (``tan.vjp``) where it has no name of its own (a lambda,
    a kit's ``rule``): a traceback through it then reads ``in tan.vjp``. A function attached
    to several rows keeps the first row's name."""
    code = getattr(rule, "__code__", None)
    if code is None or code.co_name not in _ANONYMOUS or not isinstance(rule, FunctionType):
        return rule
    name = f"{row}.{kind}"
    rule.__code__ = code.replace(co_name=name, co_qualname=name)
    rule.__name__ = rule.__qualname__ = name
    return rule


def _site() -> str:
    """``file:line`` of the first caller outside this module and the ops' kits (a ``_kits.py``
    that attaches rules for the rows that call it), relative to the package: the row's line."""
    frame = sys._getframe(1)
    while frame.f_code.co_filename == __file__ or frame.f_code.co_filename.endswith("_kits.py"):
        frame = frame.f_back  # type: ignore[assignment]
    path = os.path.relpath(frame.f_code.co_filename, _PACKAGE)
    return f"{path}:{frame.f_lineno}"


def _source_site(fn: Callable[..., Any]) -> str:
    """``file:line`` where ``fn`` is defined (its first decorator's line), relative to the folder
    holding its top-level package; where it is registered when it has no code of its own."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:
        return _site()
    top = sys.modules.get((getattr(fn, "__module__", None) or "").partition(".")[0])
    root = getattr(top, "__file__", None)
    if root is None:
        base = os.getcwd()
    else:
        base = os.path.dirname(os.path.abspath(root))
        if os.path.basename(root) == "__init__.py":
            base = os.path.dirname(base)
    return f"{os.path.relpath(code.co_filename, base)}:{code.co_firstlineno}"


def _register(prim: Primitive) -> Primitive:
    if prim.name in REGISTRY:
        raise RuntimeError(f"primitive {prim.name!r} declared twice")
    prim.sites["row"] = _site()
    REGISTRY[prim.name] = prim
    return prim


def unary(name: str, dtypes: str, impl: Callable[..., Any] | None = None) -> Primitive:
    """Declare the elementwise function ``name(x, /)``."""
    return _register(Primitive(name, "unary", impl, dtypes, (name,), arrays=frozenset({"x"})))


def binary(name: str, dtypes: str, impl: Callable[..., Any] | None = None) -> Primitive:
    """Declare the elementwise function ``name(x1, x2, /)``; either side may be a Python scalar."""
    arrays = frozenset({"x1", "x2"})
    return _register(Primitive(name, "binary", impl, dtypes, (name,), arrays=arrays))


def primitive(
    dtypes: str | None = None,
    *,
    scope: str = "",
    needs: tuple[str, ...] | None = None,
    axis_check: bool = False,
) -> Callable[[Callable[..., Any]], Primitive]:
    """Declare a general function from its ``impl(bk, <spec signature>)``."""

    def declare(impl: Callable[..., Any]) -> Primitive:
        name = f"{scope}.{impl.__name__}" if scope else impl.__name__
        sig = inspect.signature(impl)
        params = list(sig.parameters.values())[1:]  # drop ``bk``
        held = {  # the annotations, evaluated: Array, Arrays or another type
            p.name: p.annotation
            for p in list(inspect.signature(impl, eval_str=True).parameters.values())[1:]
        }
        return _register(
            Primitive(
                name,
                "general",
                impl,
                dtypes,
                needs if needs is not None else (name,),
                axis_check=axis_check,
                signature=sig.replace(parameters=params, return_annotation=sig.empty),
                arrays=frozenset(n for n, a in held.items() if a is Array or a is Arrays),
                lists=frozenset(n for n, a in held.items() if a is Arrays),
            )
        )

    return declare


class UnbatchableError(NotImplementedError):
    """vmap met a batched argument a row cannot batch (its result's shape would depend on each
    example's data); the message names the row and the way out. ``jacfwd``/``jacrev`` catch it
    and fall back to one pass per basis vector."""


def freeze() -> None:
    """Freeze every row: after ``pycograd_xp.ops`` is imported no rule attaches or changes."""
    for prim in REGISTRY.values():
        object.__setattr__(prim, "_frozen", True)


def namespace_module(
    mod: ModuleType,
    function: Callable[[Primitive], Any],
    method: Callable[[Primitive], Any] | None = None,
) -> ModuleType:
    """Fill ``mod`` from the table, as every namespace is made (ours, vmap's, the abstract one,
    compile's tracing one): ``function(row)`` for each row (None: the namespace has no such
    function), in the module or its ``linalg``/``fft`` extension, which are set as attributes;
    the rows of Array methods get ``method(row)`` when given; the linalg extension re-exports
    the main namespace's :data:`LINALG_ALIASES`. The caller adds the dtypes, the constants and
    ``__array_namespace_info__``. Returns ``mod``."""
    name = mod.__name__
    ext = {"linalg": ModuleType(f"{name}.linalg"), "fft": ModuleType(f"{name}.fft")}
    for prim in REGISTRY.values():
        if prim.kind == "method":
            f = method(prim) if method is not None else None
            target = mod
        else:
            f, target = function(prim), ext[prim.scope] if prim.scope else mod
        if f is not None:
            setattr(target, prim.short_name, f)
    for alias in LINALG_ALIASES:
        if hasattr(mod, alias):
            setattr(ext["linalg"], alias, getattr(mod, alias))
    mod.linalg, mod.fft = ext["linalg"], ext["fft"]  # type: ignore[attr-defined]
    return mod
