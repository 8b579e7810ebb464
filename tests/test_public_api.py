"""Every public name is documented, in numpydoc style (issue 22: "every public name has a
docstring with parameters and returns (a test walks the public API and checks)").

The public API is each public module's ``__all__`` (and ``pycograd_xp.compile``, public but left
out of ``__all__``), plus ``cubed_plugin``'s when Cubed is installed. For every callable there:

- a docstring;
- a ``Parameters`` section naming every parameter of its signature (a class's: its
  constructor's; a NamedTuple's fields may be an ``Attributes`` section instead), written
  ``name : type`` (``*primals`` may be written with or without its
  stars). Exempt: ``self``/``cls``, and ``*args``/``**kwargs`` spelled exactly so, the
  convention for arguments passed through to a user's function;
- a callable object (``cubed_plugin.train.logreg_loss``, a ``row_loss``) is documented by its
  class;
- a ``Returns`` (or ``Yields``) section, unless it is a class or is annotated ``-> None``
  (numpydoc's exemptions);
- the same for each public method and property a public class defines itself (a property needs
  a docstring only); a protocol's members (``pycograd_xp.typing.Array``) are the concrete
  class's, documented there.

Examples sections run (``test_examples_run``): they are doctests, run here as part of the
default test run.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import inspect
import re

import pytest

MODULES = [
    "pycograd_xp",
    "pycograd_xp.typing",
    "pycograd_xp.tree",
    "pycograd_xp.memory",
    "pycograd_xp.optim",
    "pycograd_xp.nn",
    "pycograd_xp.random",
    "pycograd_xp.data",
    "pycograd_xp.checkpoint",
    "pycograd_xp.special",
    "pycograd_xp.train",
]
if importlib.util.find_spec("cubed") is not None:
    MODULES += ["cubed_plugin", "cubed_plugin.train"]

SECTION = re.compile(r"^(\w[\w ]*)\n-+\n", re.MULTILINE)


def _ours(obj: object) -> bool:
    return getattr(obj, "__module__", "").split(".")[0] in ("pycograd_xp", "cubed_plugin")


def _public() -> dict[str, object]:
    """Qualified name -> object, each object once (under the first module that exports it)."""
    found: dict[str, object] = {}
    seen: set[int] = set()
    for modname in MODULES:
        mod = importlib.import_module(modname)
        names = list(mod.__all__) + (["compile"] if modname == "pycograd_xp" else [])
        for name in names:
            obj = getattr(mod, name)
            if not callable(obj) or not _ours(obj):
                continue  # data (constants, type aliases of other types)
            if not (inspect.isroutine(obj) or inspect.isclass(obj)):
                obj = type(obj)  # a callable object (a row_loss): its class documents it
            if id(obj) in seen:
                continue  # exported twice
            seen.add(id(obj))
            found[f"{modname}.{name}"] = obj
            if inspect.isclass(obj) and not getattr(obj, "_is_protocol", False):
                # its own members and those of our classes it inherits (Array's Imperative)
                members: dict[str, object] = {}
                for klass in reversed(obj.__mro__):
                    if _ours(klass) and not getattr(klass, "_is_protocol", False):
                        members.update(vars(klass))
                for attr, member in members.items():
                    if attr.startswith("_"):
                        continue
                    if isinstance(member, property | staticmethod | classmethod):
                        found[f"{modname}.{name}.{attr}"] = member
                    elif inspect.isfunction(member):
                        found[f"{modname}.{name}.{attr}"] = member
    return found


PUBLIC = _public()


def sections(doc: str) -> dict[str, str]:
    """A numpydoc docstring's sections: header -> body (the summary under ``""``)."""
    parts = SECTION.split(doc)
    out = {"": parts[0]}
    for header, body in zip(parts[1::2], parts[2::2], strict=True):
        out[header.strip()] = body
    return out


def documented_parameters(body: str) -> set[str]:
    """The names a Parameters section documents: its unindented ``name : type`` lines."""
    names = set()
    for line in body.splitlines():
        if line and not line[0].isspace():
            for n in line.split(" : ")[0].split(","):
                names.add(n.strip().lstrip("*"))
    return names


def _signature_parameters(obj: object) -> list[str] | None:
    target = obj.fget if isinstance(obj, property) else obj
    target = target.__func__ if isinstance(target, staticmethod | classmethod) else target
    try:
        sig = inspect.signature(target)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    names = []
    for p in sig.parameters.values():
        if p.name in ("self", "cls"):
            continue
        if p.kind is p.VAR_POSITIONAL and p.name == "args":
            continue
        if p.kind is p.VAR_KEYWORD and p.name == "kwargs":
            continue
        names.append(p.name)
    return names


def _returns_none(obj: object) -> bool:
    target = obj.__func__ if isinstance(obj, staticmethod | classmethod) else obj
    try:
        ann = inspect.signature(target).return_annotation  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return ann is None or ann == "None"


def problems(obj: object) -> list[str]:
    """What is missing from ``obj``'s docstring (empty when it is complete)."""
    doc = inspect.getdoc(obj.fget if isinstance(obj, property) else obj)
    if not doc or not doc.strip():
        return ["no docstring"]
    if isinstance(obj, property):
        return []
    found = sections(doc)
    out = []
    params = _signature_parameters(obj)
    if params:
        if inspect.isclass(obj) and "Attributes" in found and "Parameters" not in found:
            # a NamedTuple's fields are its attributes (mkdocstrings reads no signature there)
            found["Parameters"] = found["Attributes"]
        if "Parameters" not in found:
            out.append(f"no Parameters section (parameters: {', '.join(params)})")
        else:
            documented = documented_parameters(found["Parameters"])
            missing = [p for p in params if p not in documented]
            if missing:
                out.append(f"Parameters does not document {', '.join(missing)}")
    if not inspect.isclass(obj) and not _returns_none(obj):
        if "Returns" not in found and "Yields" not in found:
            out.append("no Returns section")
    return out


def test_the_walk_covers_the_api():
    # the walk finds the names it should (a broken walk would pass everything)
    for name in (
        "pycograd_xp.grad",
        "pycograd_xp.compile",
        "pycograd_xp.optim.adam",
        "pycograd_xp.nn.glorot_uniform",
        "pycograd_xp.Array.backward",
    ):
        assert name in PUBLIC
    assert len(PUBLIC) > 150


def test_sections_are_parsed():
    doc = "Summary.\n\nParameters\n----------\nx, y : int\n    Two.\n*rest : Any\n    More.\n"
    doc += "\nReturns\n-------\nint\n    The sum.\n"
    found = sections(doc)
    assert set(found) == {"", "Parameters", "Returns"}
    assert documented_parameters(found["Parameters"]) == {"x", "y", "rest"}

    def f(x: int, y: int, *rest: int) -> int:
        """Summary only."""
        return x

    assert problems(f) == [
        "no Parameters section (parameters: x, y, rest)",
        "no Returns section",
    ]


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_name_is_documented(name):
    assert problems(PUBLIC[name]) == [], name


def _examples() -> dict[str, doctest.DocTest]:
    finder = doctest.DocTestFinder(recurse=False)
    out = {}
    for name, obj in PUBLIC.items():
        target = obj.fget if isinstance(obj, property) else obj
        module = inspect.getmodule(target)
        for test in finder.find(target, name, module=module, globs={}):
            if test.examples:
                out[name] = test
    return out


EXAMPLES = _examples()


def test_the_main_functions_have_examples():
    main = [
        "pycograd_xp.grad",
        "pycograd_xp.value_and_grad",
        "pycograd_xp.vjp",
        "pycograd_xp.jvp",
        "pycograd_xp.vmap",
        "pycograd_xp.namespace",
        "pycograd_xp.compile",
        "pycograd_xp.remat",
        "pycograd_xp.memory.project",
        "pycograd_xp.optim.adam",
        "pycograd_xp.optim.sgd",
        "pycograd_xp.optim.lbfgs",
    ]
    if "cubed_plugin.fit" in PUBLIC:
        main.append("cubed_plugin.fit")
    assert [n for n in main if n not in EXAMPLES] == []


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_run(name):
    test = EXAMPLES[name]
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    out: list[str] = []
    runner.run(test, out=out.append)
    assert runner.failures == 0, "".join(out)
