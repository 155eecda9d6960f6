"""Values written as text: durations ('7m', '1h30m', '90s'), steps or a duration ('500', '10m') and loss scales
('dynamic', '128')."""

from __future__ import annotations

import math
import re

from ampgan.errors import AmpganError

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([hms])")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(text: str) -> float:
    """'7m' -> 420.0, '1h30m' -> 5400.0, '90s' or '90' -> 90.0 (seconds)."""
    cleaned = text.strip().lower()
    try:
        seconds = float(cleaned)
    except ValueError:
        parts = _DURATION_PART.findall(cleaned)
        if not parts or "".join(number + unit for number, unit in parts) != cleaned:
            raise AmpganError(f"cannot read the duration {text!r}: write it like 90s, 7m or 1h30m") from None
        seconds = sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)
    if not math.isfinite(seconds):
        raise AmpganError(f"the duration {text!r} is not finite: write it like 90s, 7m or 1h30m")
    return seconds


def positive_duration(text: str) -> float:
    seconds = parse_duration(text)
    if not seconds > 0:
        raise AmpganError(f"must be positive, got {text}")
    return seconds


def parse_steps_or_duration(text: str) -> tuple[str, float]:
    """'500' -> ('steps', 500); '10m' -> ('seconds', 600.0): how often --checkpoint-every saves."""
    text = str(text).strip().lower()
    return ("steps", int(text)) if text.isdecimal() and int(text) >= 1 else ("seconds", positive_duration(text))


def parse_loss_scale(text: str) -> float | None:
    """'dynamic' -> None (GradScaler decides); '128' -> 128.0 (a fixed scale, as in the study)."""
    if text.strip().lower() == "dynamic":
        return None
    try:
        scale = float(text)
    except ValueError:
        raise AmpganError(f"must be 'dynamic' or a number such as 128, got {text!r}") from None
    if not (math.isfinite(scale) and scale > 0):
        raise AmpganError(f"must be 'dynamic' or a positive, finite number such as 128, got {text!r}")
    return scale
