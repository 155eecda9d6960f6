"""Under torchrun: failures agreed by every rank, and each data-parallel configuration's single-process twin.

A configuration that fails on one rank only (out of memory on the fullest GPU, say) must fail on every rank
before any of them enters a collective the failed one would never join: it is first tried on each rank
alone (no DDP, no collective inside), and every rank learns whether any failed. Each data-parallel
configuration is then timed beside its twin, the same step without DDP (the "1 process" reference for the
scaling efficiency), built and warmed up the same agreed way.
"""

from __future__ import annotations

from ampgan.bench.results import ConfigResult, failure
from ampgan.bench.spec import BenchSpec
from ampgan.speed.step_timer import StepTimer
from ampgan.training.distributed import gather_objects, world
from ampgan.training.out_of_memory import release_memory


def agreed_local_trial(spec: BenchSpec, precision: str, batch_size: int, dataset, device) -> ConfigResult | None:
    """One step of the configuration on this rank alone (no DDP, no collective inside), then every rank
    learns whether any failed: None when it ran everywhere, else the result every rank records."""

    # The config is built inside the trial too: whatever fails is agreed.
    _, failed = _agreed(
        lambda: StepTimer(
            spec.train_config(precision, batch_size), dataset, device, data_parallel=False, across_ranks=False
        )()
    )
    release_memory(device)  # the trial's state, whether it ran or failed
    if failed is None:
        return None
    rank, (status, reason) = failed
    return ConfigResult(
        batch_size=batch_size,
        precision=precision,
        status=status,
        processes=world().size,
        reason=f"rank {rank}: {reason}",
    )


def local_twins(spec: BenchSpec, contenders: list) -> dict:
    """{id(contender): its local twin} for the contenders (bench/measure.py) whose twin every rank built and
    warmed up. A twin allocates a second state beside every data-parallel one: one that fails on any rank (out
    of memory, say) makes its contender an oom (or error) row on every rank, agreed before any round, never a
    traceback."""
    twins = {}
    for contender in contenders:
        twin, failed = _agreed(lambda: _twin(spec, contender))
        if failed is None:
            twins[id(contender)] = twin
            continue
        twin = None  # a twin built here while another rank's failed: freed with the rest
        release_memory(contender.device)  # the failed twin's tensors, once nothing refers to them
        rank, (status, reason) = failed
        contender.result.status = status
        contender.result.reason = (
            f"rank {rank}: its single-process twin (the scaling efficiency's reference, built beside the "
            f"data-parallel step) failed: {reason}"
        )
    return twins


def _twin(spec: BenchSpec, contender) -> StepTimer:
    """The same configuration without DDP, warmed up: every rank steps alone, all at once. Warmed up with no
    collective inside (a rank failing here must not leave the others in one); its timed calls then report the
    slowest rank's time, as the data-parallel step's do."""
    timer = contender.timer
    twin = StepTimer(
        spec.train_config(contender.result.precision, contender.result.batch_size),
        timer.dataset,
        contender.device,
        data_parallel=False,
        batch=(timer.real, timer.labels),
        across_ranks=False,
    )
    for _ in range(max(1, spec.warmup)):
        twin()
    twin.across_ranks = world().distributed
    return twin


def _agreed(attempt) -> tuple[object, tuple[int, tuple[str, str]] | None]:
    """(what `attempt()` returned on this rank, None when it failed here; the first rank whose attempt failed
    and its failure's (status, reason), every rank's outcome gathered, None when it ran everywhere)."""
    try:
        value, outcome = attempt(), None
    except Exception as error:  # noqa: BLE001 - agreed over the ranks, then recorded
        value, outcome = None, failure(error)
    return value, next(((rank, found) for rank, found in enumerate(gather_objects(outcome)) if found is not None), None)
