"""JVP rules of the fft extension: every transform (and shift) is linear."""

from ..ops._rules.jvp import linear_rows

linear_rows("fft.fft", "fft.ifft", "fft.fftn", "fft.ifftn", "fft.rfft", "fft.irfft", "fft.rfftn",
       "fft.irfftn", "fft.hfft", "fft.ihfft", "fft.fftshift", "fft.ifftshift")  # fmt: skip
