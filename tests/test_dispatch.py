"""The interpreter stack and the one choke point (issue 18, point 3).

Every running transform has one frame on ``pycograd_xp._state.STACK``, innermost last; the
per-thread state of the transforms is that stack and nothing else; a call a namespace does
not evaluate itself leaves through ``namespace._dispatch.bind``.
"""

from __future__ import annotations

import ast
import pathlib
import threading

import numpy as np
import pytest

import pycograd_xp as pg
from pycograd_xp import memory
from pycograd_xp._state import STACK, describe

ROOT = pathlib.Path(__file__).resolve().parents[1]
xp = pg.namespace(np)


def _kinds() -> list[str]:
    return [f.kind for f in STACK.frames if f.kind not in ("grad_mode", "part")]


def test_nested_transforms_push_one_frame_each_outermost_first():
    seen = []

    def f(x):
        seen.append((_kinds(), describe(), STACK.grad_depth, STACK.batch is not None))
        return xp.sum(xp.sin(x))

    def g(x):
        return pg.vmap(pg.grad(f))(x)

    x = xp.reshape(xp.linspace(0.1, 1.0, 6), (2, 3))
    pg.jvp(g, (x,), (xp.ones_like(x),))
    kinds, text, depth, batched = seen[0]
    assert kinds == ["jvp", "vmap", "grad"]
    assert text.startswith("jvp > ") and "vmap(level 1)" in text and text.endswith("enable_grad")
    assert depth == 1 and batched
    assert STACK.frames == () and describe() == "none"


def test_nested_transforms_with_parts_kept():
    """With a backend asking for the running parts (cubed_plugin), the same nesting: the Part
    frames are on the stack between the transforms' and change no view of it."""
    from pycograd_xp import _parts

    was = _parts.WATCHED[0]
    _parts.WATCHED[0] = True
    try:
        test_nested_transforms_push_one_frame_each_outermost_first()
    finally:
        _parts.WATCHED[0] = was


def test_grad_mode_is_the_innermost_grad_mode_frame():
    assert STACK.grad_enabled
    with pg.no_grad():
        assert not STACK.grad_enabled and _kinds() == []
        with pg.enable_grad():
            assert STACK.grad_enabled
        assert not STACK.grad_enabled
    assert STACK.grad_enabled and STACK.frames == ()


def test_projection_and_compile_push_their_frames():
    seen = []

    def loss(w):
        seen.append((_kinds(), STACK.redirect is not None))
        return xp.sum(w * w)

    memory.project(loss, memory.spec((3,), "float64"))
    assert seen and all(k[:1] == ["abstract"] and redirected for k, redirected in seen)
    seen.clear()
    pg.compile(loss)(xp.ones(3))
    assert seen[0][0] == ["trace"] and seen[0][1]
    assert STACK.frames == ()


def test_an_error_inside_leaves_the_stack_as_it_was():
    def f(x):
        raise KeyError("boom")

    for transform in (pg.grad, pg.vmap, lambda f: lambda x: pg.jvp(f, (x,), (x,)), pg.compile):
        with pytest.raises(KeyError):
            transform(f)(xp.ones(3))
        assert STACK.frames == ()
    with pytest.raises(KeyError), pg.no_grad():
        pg.grad(f)(xp.ones(3))
    assert STACK.frames == () and STACK.grad_enabled


def test_the_view_kept_by_push_and_restore_is_the_derived_one():
    """push changes only the fields a GradMode or Grad frame decides and restore takes back
    the view it replaced: each must equal the view derived from the frames anew, at every
    step of a nesting (a Jvp and a Vmap among them)."""
    from pycograd_xp import _state
    from pycograd_xp._state import Grad, GradMode, Jvp, Vmap, push, restore

    xp = pg.namespace(np)
    fields = [k for k in _state._derive(()) if k != "frames"]

    def same():
        want = _state._derive(STACK.frames)
        assert {k: getattr(STACK, k) for k in fields} == {k: want[k] for k in fields}

    seq = [
        (Grad(), GradMode(True)),
        (GradMode(False),),
        (Jvp(None, lambda *a: None, lambda *a: None),),
        (Grad(),),
        (Vmap(xp),),
        (GradMode(True), Grad()),
    ]
    saved = []
    for frames in seq:
        saved.append(push(*frames))
        same()
    for prev in reversed(saved):
        restore(prev)
        same()
    assert STACK.frames == ()


def test_each_thread_has_its_own_stack():
    inside, release = threading.Event(), threading.Event()
    other: list = []

    def f(x):
        inside.set()
        release.wait(10)
        return xp.sum(x * x)

    def run():
        other.append(pg.grad(f)(xp.ones(2)))

    t = threading.Thread(target=run)
    t.start()
    assert inside.wait(10)
    assert STACK.frames == () and STACK.grad_depth == 0  # the other thread is inside grad
    release.set()
    t.join(10)
    np.testing.assert_array_equal(np.asarray(other[0]), [2.0, 2.0])


def _sources() -> list[tuple[pathlib.Path, ast.Module]]:
    out = []
    for package in ("pycograd_xp", "cubed_plugin"):
        for path in sorted((ROOT / package).rglob("*.py")):
            out.append((path, ast.parse(path.read_text())))
    return out


def test_the_stack_is_the_only_per_thread_state_and_only_state_py_writes_it():
    state = ROOT / "pycograd_xp" / "_state.py"
    offenders = []
    for path, tree in _sources():
        if path == state:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "local":
                if isinstance(node.value, ast.Name) and node.value.id == "threading":
                    offenders.append(f"{path.name}:{node.lineno}: threading.local")
            targets = []
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if (
                        isinstance(sub, ast.Attribute)
                        and isinstance(sub.value, ast.Name)
                        and sub.value.id == "STACK"
                    ):
                        offenders.append(f"{path.name}:{node.lineno}: writes STACK.{sub.attr}")
    assert offenders == [], "per-thread state outside _state.py's stack:\n" + "\n".join(offenders)


def test_only_the_choke_point_calls_another_namespace_for_a_row():
    """``function_of`` (a row's function on another namespace) is called only by ``bind``."""
    dispatch = ROOT / "pycograd_xp" / "namespace" / "_dispatch.py"
    callers = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "function_of":
                if path != dispatch:
                    callers.append(f"{path.name}:{node.lineno}")
    assert callers == []
