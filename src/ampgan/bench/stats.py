"""Timing statistics: pure functions, no clocks, no I/O (checked against hand-computed values).

Quartiles use linear interpolation between order statistics (numpy's default, and what
torch.utils.benchmark reports), so the IQR of [1, 2, 3, 4] is 3.25 - 1.75 = 1.5.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

NOISY_IQR_FRACTION = 0.10  # torch.utils.benchmark warns above this


@dataclass(frozen=True)
class TimingStats:
    count: int
    median_s: float
    q1_s: float
    q3_s: float
    iqr_s: float
    min_s: float
    mean_s: float

    @property
    def relative_iqr(self) -> float:
        return self.iqr_s / self.median_s if self.median_s > 0 else float("inf")

    @property
    def noisy(self) -> bool:
        return self.relative_iqr > NOISY_IQR_FRACTION

    def to_dict(self) -> dict:
        return asdict(self) | {"relative_iqr": self.relative_iqr, "noisy": self.noisy}


def timing_stats(samples_s: Sequence[float]) -> TimingStats:
    if not samples_s:
        raise ValueError("no timing samples")
    values = np.asarray(samples_s, dtype=np.float64)
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return TimingStats(
        count=len(values),
        median_s=float(median),
        q1_s=float(q1),
        q3_s=float(q3),
        iqr_s=float(q3 - q1),
        min_s=float(values.min()),
        mean_s=float(values.mean()),
    )


def throughput(batch_size: int, step_s: float) -> dict:
    """Images per second and seconds per 1000 samples (the study's Figure 2) for one step time."""
    return {"images_per_s": batch_size / step_s, "s_per_1000_samples": 1000.0 * step_s / batch_size}


def achieved_fraction_of_peak(
    flops_per_step: float, step_s: float, peak_tflops: float | None
) -> tuple[float, float | None]:
    """(achieved TFLOP/s, percent of peak or None when the peak is unknown)."""
    achieved = flops_per_step / step_s / 1e12
    return achieved, (100.0 * achieved / peak_tflops if peak_tflops else None)
