"""JVP rules of the fft extension: every transform (and shift) is linear."""

from ._helpers import linear

linear("fft.fft", "fft.ifft", "fft.fftn", "fft.ifftn", "fft.rfft", "fft.irfft", "fft.rfftn",
       "fft.irfftn", "fft.hfft", "fft.ihfft", "fft.fftshift", "fft.ifftshift")  # fmt: skip
