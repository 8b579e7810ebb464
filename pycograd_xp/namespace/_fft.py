"""The ``fft`` extension."""

from __future__ import annotations

from typing import Any

from .._primitive import primitive

CFP, RFP = "complex floating-point", "real floating-point"


@primitive(CFP, scope="fft")
def fft(bk: Any, x: Any, /, *, n: int | None = None, axis: int = -1,
        norm: str = "backward") -> Any:  # fmt: skip
    return bk.fft.fft(x, n=n, axis=axis, norm=norm)


@primitive(CFP, scope="fft")
def ifft(bk: Any, x: Any, /, *, n: int | None = None, axis: int = -1,
         norm: str = "backward") -> Any:  # fmt: skip
    return bk.fft.ifft(x, n=n, axis=axis, norm=norm)


@primitive(CFP, scope="fft")
def fftn(bk: Any, x: Any, /, *, s: Any = None, axes: Any = None, norm: str = "backward") -> Any:
    return bk.fft.fftn(x, s=s, axes=axes, norm=norm)


@primitive(CFP, scope="fft")
def ifftn(bk: Any, x: Any, /, *, s: Any = None, axes: Any = None, norm: str = "backward") -> Any:
    return bk.fft.ifftn(x, s=s, axes=axes, norm=norm)


@primitive(RFP, scope="fft")
def rfft(bk: Any, x: Any, /, *, n: int | None = None, axis: int = -1,
         norm: str = "backward") -> Any:  # fmt: skip
    return bk.fft.rfft(x, n=n, axis=axis, norm=norm)


@primitive(CFP, scope="fft")
def irfft(bk: Any, x: Any, /, *, n: int | None = None, axis: int = -1,
          norm: str = "backward") -> Any:  # fmt: skip
    return bk.fft.irfft(x, n=n, axis=axis, norm=norm)


@primitive(RFP, scope="fft")
def rfftn(bk: Any, x: Any, /, *, s: Any = None, axes: Any = None, norm: str = "backward") -> Any:
    return bk.fft.rfftn(x, s=s, axes=axes, norm=norm)


@primitive(CFP, scope="fft")
def irfftn(bk: Any, x: Any, /, *, s: Any = None, axes: Any = None,
           norm: str = "backward") -> Any:  # fmt: skip
    return bk.fft.irfftn(x, s=s, axes=axes, norm=norm)


@primitive(CFP, scope="fft")
def hfft(bk: Any, x: Any, /, *, n: int | None = None, axis: int = -1,
         norm: str = "backward") -> Any:  # fmt: skip
    return bk.fft.hfft(x, n=n, axis=axis, norm=norm)


@primitive(RFP, scope="fft")
def ihfft(bk: Any, x: Any, /, *, n: int | None = None, axis: int = -1,
          norm: str = "backward") -> Any:  # fmt: skip
    return bk.fft.ihfft(x, n=n, axis=axis, norm=norm)


@primitive(scope="fft")
def fftfreq(bk: Any, n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Any:
    return bk.fft.fftfreq(n, d=d, dtype=dtype, device=device)


@primitive(scope="fft")
def rfftfreq(bk: Any, n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Any:
    return bk.fft.rfftfreq(n, d=d, dtype=dtype, device=device)


@primitive(scope="fft")
def fftshift(bk: Any, x: Any, /, *, axes: Any = None) -> Any:
    return bk.fft.fftshift(x, axes=axes)


@primitive(scope="fft")
def ifftshift(bk: Any, x: Any, /, *, axes: Any = None) -> Any:
    return bk.fft.ifftshift(x, axes=axes)
