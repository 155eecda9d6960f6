"""What fp16 and bf16 can represent: limits and the fate of a value cast into them.

Round-to-nearest decides the edges: a value overflows to inf from halfway between the largest
finite value and the next power of two (65520 for fp16), and flushes to zero at or below half the
smallest subnormal (2^-25 for fp16). Between zero and the smallest normal, values survive as
subnormals with fewer significant bits ("precision loss").
"""

from __future__ import annotations

import torch

import ampgan.precisions as precisions
from ampgan.precisions import PRECISIONS, FormatRange  # noqa: F401 - FormatRange: this module's readers use it

# The 16-bit formats by the names of their modes (these names hold formats, precisions.py's hold names).
FP16 = PRECISIONS[precisions.FP16].format_range
BF16 = PRECISIONS[precisions.BF16].format_range
# Every 16-bit mode's format (precisions.py), by name.
FORMATS = {name: mode.format_range for name, mode in PRECISIONS.items() if mode.format_range is not None}


def classify(values: torch.Tensor, fmt: FormatRange, scale: float = 1.0) -> dict[str, int]:
    """Counts of (non-zero, finite) values that overflow, flush to zero, or become subnormal when
    multiplied by `scale` and cast to the format; zeros are counted apart (they lose nothing)."""
    magnitudes = values.detach().abs().double().flatten() * scale
    finite = torch.isfinite(magnitudes)
    nonzero = finite & (magnitudes > 0)
    return {
        "values": int(values.numel()),
        "zeros": int((finite & (magnitudes == 0)).sum()),
        "overflow": int((nonzero & (magnitudes >= fmt.overflow_at)).sum()),
        "flush_to_zero": int((nonzero & (magnitudes <= fmt.flush_at_or_below)).sum()),
        "subnormal": int((nonzero & (magnitudes > fmt.flush_at_or_below) & (magnitudes < fmt.min_normal)).sum()),
    }


def log2_histogram(values: torch.Tensor, low: int = -150, high: int = 130) -> tuple[list[int], int]:
    """(counts per bucket floor(log2|x|) for x in [low, high], zeros): magnitudes on a log2 axis."""
    magnitudes = values.detach().abs().double().flatten()
    magnitudes = magnitudes[torch.isfinite(magnitudes)]
    exponents = torch.floor(torch.log2(magnitudes[magnitudes > 0])).clamp(low, high).long() - low
    return torch.bincount(exponents, minlength=high - low + 1).tolist(), int((magnitudes == 0).sum())
