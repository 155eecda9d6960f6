"""The plan (speed/plan.py): what each command's choice picks from the same decisions, and a plan whose every
setting is given measures nothing and says nothing."""

from __future__ import annotations

import torch
from conftest import tiny_config

from ampgan.speed import plan
from ampgan.speed.decision import Decision
from ampgan.speed.plan import EVERY_USEFUL, FASTEST_MIXED, GIVEN, Asked, RunPlan, plan_run


def _decision(name: str, verdict: str, estimate: float) -> Decision:
    interval = {"estimate": estimate, "low": estimate * 0.98, "high": estimate * 1.02, "rounds": 6}
    return Decision(name, 64, verdict, 0.1, 0.1 / estimate, interval, 6)


DECISIONS = {
    "bf16": _decision("bf16", "faster", 1.6),
    "fp16": _decision("fp16", "faster", 1.9),
    "tf32": _decision("tf32", "no clear difference", 1.0),
    "fp16-pure": _decision("fp16", "slower", 0.5),
}
CANNOT_RUN = [{"precision": "tf32-only-on-cuda", "reason": "needs CUDA"}]


def test_each_choice_picks_from_the_same_decisions_what_its_command_needs():
    # bench: fp32 and every mode not slower (one that breaks even may gain at larger batches), the unmeasured too
    chosen, left_out = EVERY_USEFUL.pick({k: DECISIONS[k] for k in ("bf16", "tf32")}, CANNOT_RUN, ["fp16"])
    assert chosen[0] == "fp32" and set(chosen) == {"fp32", "bf16", "tf32", "fp16"}
    assert left_out == CANNOT_RUN
    chosen, left_out = EVERY_USEFUL.pick({"fp16": DECISIONS["fp16-pure"]}, [], [])
    assert chosen == ("fp32",) and left_out[0]["precision"] == "fp16" and "slower" in left_out[0]["reason"]
    # compare: fp32 against the fastest faster mode; every other one left out with its reason
    chosen, left_out = FASTEST_MIXED.pick({k: DECISIONS[k] for k in ("bf16", "fp16")}, CANNOT_RUN, [])
    assert chosen == ("fp32", "fp16") and [item["precision"] for item in left_out] == ["tf32-only-on-cuda", "bf16"]
    # what follows from the choice, in one place each
    assert (GIVEN.warn_named, EVERY_USEFUL.warn_named, FASTEST_MIXED.warn_named) == (False, False, True)
    assert (GIVEN.alone_decides, EVERY_USEFUL.alone_decides, FASTEST_MIXED.alone_decides) == (True, True, False)


def test_a_plan_whose_settings_are_all_given_measures_nothing(monkeypatch):
    monkeypatch.setattr(plan, "fit_threads", lambda *args: {"threads": 1, "why": "given"})
    for name in ("channels_last_precisions", "compiled_precisions", "decide_for_run", "cached_decisions"):
        monkeypatch.setattr(plan, name, lambda *args, **kwargs: (_ for _ in ()).throw(AssertionError("measured")))
    lines: list[str] = []
    config = tiny_config()
    for choose in (GIVEN, EVERY_USEFUL, FASTEST_MIXED):
        asked = Asked(lambda precision: config, choose, ("fp32", "bf16"), channels_last=("bf16",), compile=())
        found = plan_run(asked, None, torch.device("cpu"), lines.append)
        assert found == RunPlan(("fp32", "bf16"), ("bf16",), (), threads={"threads": 1, "why": "given"})
    assert lines == []
