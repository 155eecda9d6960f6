"""What fp16 and bf16 can represent: limits and the fate of a value cast into them.

Round-to-nearest decides the edges: a value overflows to inf from halfway between the largest
finite value and the next power of two (65520 for fp16), and flushes to zero at or below half the
smallest subnormal (2^-25 for fp16). Between zero and the smallest normal, values survive as
subnormals with fewer significant bits ("precision loss").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class FormatRange:
    name: str
    max_finite: float
    overflow_at: float  # |x| >= this rounds to inf
    min_normal: float
    min_subnormal: float

    @property
    def flush_at_or_below(self) -> float:
        return self.min_subnormal / 2  # ties round to even, i.e. to zero


FP16 = FormatRange("fp16", max_finite=65504.0, overflow_at=65520.0, min_normal=2.0**-14, min_subnormal=2.0**-24)
BF16 = FormatRange("bf16", max_finite=(2 - 2**-7) * 2.0**127, overflow_at=(2 - 2**-8) * 2.0**127,
                   min_normal=2.0**-126, min_subnormal=2.0**-133)
FORMATS = {"fp16": FP16, "bf16": BF16}


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
    zeros = int((magnitudes == 0).sum())
    exponents = torch.floor(torch.log2(magnitudes[magnitudes > 0])).clamp(low, high).long() - low
    return torch.bincount(exponents, minlength=high - low + 1).tolist(), zeros
