"""VJP rules of the ``fft`` extension. Every transform is linear; in the JAX convention its
cotangent map is its transpose. The DFT matrix is symmetric, so fft/ifft transpose to
themselves (same norm); the real transforms add a real part or a conjugate and the Hermitian
weights (each interior bin of a half spectrum stands for two bins of the full one)."""

from __future__ import annotations

from .._primitive import defvjp, nondifferentiable
from ..ops._rules.vjp import made_like, zeros_beside

DUAL = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _resize(ns, ct, axis, size):
    """Truncate or zero-pad ``ct`` along ``axis`` to ``size`` (undoing fft's ``n``)."""
    have = ct.shape[axis]
    if have == size:
        return ct
    if have > size:
        idx = [slice(None)] * ct.ndim
        idx[axis] = slice(0, size)
        return ct[tuple(idx)]
    return ns.concat([ct, zeros_beside(ns, ct, axis, size - have)], axis=axis)


def _axes_of(x, s, axes):
    if axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    return tuple(a % x.ndim for a in axes)


def _hermitian_weights(ns, n, m, dtype, like):
    """2 for the interior bins of a length-m half spectrum of a length-n signal, 1 at DC and
    (n even) at Nyquist."""
    w = [1.0] + [2.0] * (m - 1)
    if n % 2 == 0 and m > 1:
        w[-1] = 1.0
    return ns.asarray(w, dtype=dtype, **made_like(ns, like))


def _c2c(name):
    def rule(ns, g, out, x, /, *, n=None, axis=-1, norm="backward"):
        ct = getattr(ns.fft, name)(g, axis=axis, norm=norm)
        return (_resize(ns, ct, axis % x.ndim, x.shape[axis]),)

    return rule


def _c2c_n(name):
    def rule(ns, g, out, x, /, *, s=None, axes=None, norm="backward"):
        axes = _axes_of(x, s, axes)
        ct = getattr(ns.fft, name)(g, axes=axes, norm=norm)
        for a in axes:
            ct = _resize(ns, ct, a, x.shape[a])
        return (ct,)

    return rule


def _rfft(ns, g, out, x, /, *, n=None, axis=-1, norm="backward"):
    axis = axis % x.ndim
    size = x.shape[axis] if n is None else n
    full = ns.fft.fft(_resize(ns, g, axis, size), axis=axis, norm=norm)
    return (_resize(ns, ns.real(full), axis, x.shape[axis]),)


def _irfft(ns, g, out, x, /, *, n=None, axis=-1, norm="backward"):
    axis = axis % x.ndim
    size = g.shape[axis]
    half = ns.fft.rfft(g, axis=axis, norm=DUAL[norm])
    w = _hermitian_weights(ns, size, half.shape[axis], g.dtype, g)
    shape = [1] * g.ndim
    shape[axis] = half.shape[axis]
    ct = ns.conj(half) * ns.reshape(w, tuple(shape))
    return (_resize(ns, ct, axis, x.shape[axis]),)


def _hfft(ns, g, out, x, /, *, n=None, axis=-1, norm="backward"):
    # hfft(x) = irfft(conj(x)) with the dual norm
    (ct,) = _irfft(ns, g, None, x, n=n, axis=axis, norm=DUAL[norm])
    return (ns.conj(ct),)


def _ihfft(ns, g, out, x, /, *, n=None, axis=-1, norm="backward"):
    # ihfft(x) = conj(rfft(x)) with the dual norm
    return _rfft(ns, ns.conj(g), None, x, n=n, axis=axis, norm=DUAL[norm])


def _rfftn(ns, g, out, x, /, *, s=None, axes=None, norm="backward"):
    axes = _axes_of(x, s, axes)
    sizes = [x.shape[a] if s is None else s[i] for i, a in enumerate(axes)]
    g = _resize(ns, g, axes[-1], sizes[-1])
    full = ns.fft.fftn(g, axes=axes, norm=norm)
    ct = ns.real(full)
    for a in axes:
        ct = _resize(ns, ct, a, x.shape[a])
    return (ct,)


def _irfftn(ns, g, out, x, /, *, s=None, axes=None, norm="backward"):
    # irfftn = irfft on the last axis after ifftn on the others
    axes = _axes_of(x, s, axes)
    last, others = axes[-1], axes[:-1]
    (ct,) = _irfft(ns, g, None, x, n=g.shape[last], axis=last, norm=norm)
    if others:
        ct = ns.fft.ifftn(ct, axes=others, norm=norm)
    for a in others:
        ct = _resize(ns, ct, a, x.shape[a])
    return (ct,)


def _shift(inverse_name):
    def rule(ns, g, out, x, /, *, axes=None):
        return (getattr(ns.fft, inverse_name)(g, axes=axes),)

    return rule


defvjp("fft.fft", _c2c("fft"))
defvjp("fft.ifft", _c2c("ifft"))
defvjp("fft.fftn", _c2c_n("fftn"))
defvjp("fft.ifftn", _c2c_n("ifftn"))
defvjp("fft.rfft", _rfft)
defvjp("fft.irfft", _irfft)
defvjp("fft.rfftn", _rfftn)
defvjp("fft.irfftn", _irfftn)
defvjp("fft.hfft", _hfft)
defvjp("fft.ihfft", _ihfft)
defvjp("fft.fftshift", _shift("ifftshift"))
defvjp("fft.ifftshift", _shift("fftshift"))
nondifferentiable("fft.fftfreq", "fft.rfftfreq")
