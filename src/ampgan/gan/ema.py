"""An exponential moving average of G, as BigGAN and StyleGAN sample and evaluate from: what a model
declares (`GAN(ema=ampgan.EMA(decay=0.999))`) and the decay at each step (pure).

ampgan keeps the average itself (training/ema.py): an fp32 copy of G whatever the training precision,
updated after the step's last change to G, never given to an optimizer, saved in every checkpoint, and
the generator that samples, `generate`, `export` and every evaluation use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ampgan.errors import AmpganError
from ampgan.gan.options import is_whole

# What samples and evaluations are drawn from when a model declares no EMA (and what a study from before
# GAN.ema was drawn from).
G_OWN_WEIGHTS = "G's own weights"


@dataclass(frozen=True)
class EMA:
    """- `decay`: the average keeps this share of itself at each update (BigGAN 0.9999, tiny runs 0.999);
    - `start`: up to this step the average is a copy of G (BigGAN's ema_start: averaging the first,
      fast-moving steps would keep their weights for a long time);
    - `every`: update the average every k steps (the decay applies once per update);
    - `rampup`: StyleGAN2-ADA's ramp-up: the average's half-life is at most `rampup` x the steps so far
      (0.05: at step 1000 it averages over about 50 steps), so an early average is not dominated by the
      initial weights; None keeps `decay` from the start.
    """

    decay: float = 0.999
    start: int = 0
    every: int = 1
    rampup: float | None = None

    def describe(self) -> str:
        ramp = f", ramp-up {self.rampup:g}" if self.rampup is not None else ""
        start = f", from step {self.start}" if self.start else ""
        every = f", every {self.every} steps" if self.every != 1 else ""
        return f"the EMA of G (decay {self.decay:g}{start}{every}{ramp})"

    def due(self, step: int) -> bool:
        """Whether the average is updated after the step that made the step count `step`."""
        return step % self.every == 0

    def decay_at(self, step: int) -> float:
        """The decay of the update after step `step` (the step count after it): 0 (copy G) up to
        `start`; with `rampup`, the decay whose half-life is min(decay's, rampup x step) steps."""
        if step <= self.start:
            return 0.0
        if self.rampup is None:
            return self.decay
        half_life = min(math.log(0.5) / math.log(self.decay), self.rampup * step)
        return 0.5 ** (1.0 / half_life)


# Each field of an EMA: what it must be (as the error line says it) and the test of that.
_FIELDS = (
    (
        "decay",
        "a number between 0 and 1 (the share the average keeps at each update, e.g. 0.999)",
        lambda value: not isinstance(value, bool) and isinstance(value, (int, float)) and 0.0 < value < 1.0,
    ),
    ("start", "a whole number of at least 0", lambda value: is_whole(value, 0)),
    ("every", "a whole number of at least 1", lambda value: is_whole(value, 1)),
    (
        "rampup",
        "a positive number (StyleGAN2-ADA uses 0.05) or None",
        lambda value: value is None or (not isinstance(value, bool) and isinstance(value, (int, float)) and value > 0),
    ),
)


def check_ema(ema, origin: str) -> EMA | None:
    """GAN.ema checked: one line naming the field and what it may be."""
    if ema is None:
        return None
    if not isinstance(ema, EMA):
        raise AmpganError(f"{origin}: GAN.ema is {type(ema).__name__}: use ampgan.EMA(decay=0.999) (or leave it None)")
    for name, requirement, accept in _FIELDS:
        if not accept(getattr(ema, name)):
            raise AmpganError(f"{origin}: GAN.ema {name} must be {requirement}, got {getattr(ema, name)!r}")
    return ema
