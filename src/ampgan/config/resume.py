"""What a resumed run may change: how long it runs and what it writes, never what it computes."""

from __future__ import annotations

# Paths, or whole sections ending in ".*". Anything else would make the resumed run a different experiment.
SAFE_TO_CHANGE_ON_RESUME = frozenset(
    {
        "budget.steps",
        "budget.time_budget_s",
        "checkpoints.*",
        "logging.*",
        "data.download",
        "data.cache",
    }
)


def safe_to_change(path: str) -> bool:
    section = path.partition(".")[0]
    return path in SAFE_TO_CHANGE_ON_RESUME or f"{section}.*" in SAFE_TO_CHANGE_ON_RESUME
