import pytest
import torch

from ampgan.bench.ops import count_flops_by_kind
from ampgan.bench.stats import achieved_fraction_of_peak, throughput, timing_stats


def test_timing_stats_against_hand_computed_quartiles():
    # Sorted: 1, 2, 3, 4. Linear interpolation: q1 at position 0.75 -> 1.75, q3 at 2.25 -> 3.25.
    stats = timing_stats([4.0, 1.0, 3.0, 2.0])
    assert (stats.median_s, stats.q1_s, stats.q3_s, stats.iqr_s, stats.min_s) == (2.5, 1.75, 3.25, 1.5, 1.0)
    assert stats.relative_iqr == pytest.approx(0.6) and stats.noisy


def test_quiet_samples_are_not_flagged_noisy():
    # 0.100, 0.101, 0.102, 0.103, 0.104: median 0.102, q1 0.101, q3 0.103 -> IQR/median = 1.96%.
    stats = timing_stats([0.100, 0.101, 0.102, 0.103, 0.104])
    assert stats.relative_iqr == pytest.approx(0.002 / 0.102)
    assert not stats.noisy


def test_throughput_and_fraction_of_peak():
    assert throughput(2048, 0.41) == pytest.approx(
        {"images_per_s": 2048 / 0.41, "s_per_1000_samples": 0.41 * 1000 / 2048}
    )
    achieved, percent = achieved_fraction_of_peak(65e12 * 0.5, 1.0, 65.0)  # half a T4's fp16 peak
    assert achieved == pytest.approx(32.5) and percent == pytest.approx(50.0)
    assert achieved_fraction_of_peak(1e12, 1.0, None) == (1.0, None)


def test_flop_count_of_a_convolution_matches_its_formula():
    # Forward conv: 2 * N * C_out * H_out * W_out * C_in * k * k.
    conv = torch.nn.Conv2d(16, 32, 3, padding=1)
    x = torch.randn(4, 16, 8, 8)
    assert count_flops_by_kind(lambda: conv(x)) == {
        "convolution": 2 * 4 * 32 * 8 * 8 * 16 * 3 * 3,
        "matmul": 0,
        "other": 0,
    }


def test_flop_count_of_a_linear_layer_forward_and_backward():
    linear = torch.nn.Linear(64, 32)
    x = torch.randn(8, 64, requires_grad=True)
    forward = 2 * 8 * 64 * 32
    # Backward computes the input gradient and the weight gradient: two more matmuls of that size.
    assert count_flops_by_kind(lambda: linear(x).sum().backward()) == {
        "convolution": 0,
        "matmul": 3 * forward,
        "other": 0,
    }
