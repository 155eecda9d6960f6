"""What tests put in place of slow work they do not check, shared by conftest (in-process tests) and the
scripts tests run in other processes (the interrupted study's driver): one copy of each stand-in."""

from __future__ import annotations

# The evaluator trained briefly: two epochs, at least this many steps (digits reaches 0.88 held-out accuracy
# there, 0.59 at 40; the evaluator's floor is 0.5; synthetic 1.00).
BRIEF_EVALUATOR_STEPS = 50


def untraced_op_tables(spec, dataset, device, log=None, stop_check=None, cycle_s=None) -> dict:
    """bench.op_tables.trace_op_tables as a bench that traced nothing: every precision left out, saying why."""
    from ampgan.precisions import PRECISIONS

    traced = [name for name, mode in PRECISIONS.items() if mode.traced]
    return {
        "op_tables": {},
        "op_tables_failed": [{"precision": name, "reason": "not traced in this test"} for name in traced],
    }


def brief_evaluator_training(evaluator) -> dict:
    """{attribute: value} of quality/evaluator.py (the module given) that make it train briefly."""
    train_in_full = evaluator._train_classifier

    def train_briefly(network, images, labels, epochs, seed, device, batch_size=128):
        return train_in_full(network, images, labels, min(epochs, 2), seed, device, batch_size)

    return {
        "MIN_TRAINING_STEPS": min(evaluator.MIN_TRAINING_STEPS, BRIEF_EVALUATOR_STEPS),
        "_train_classifier": train_briefly,
    }
