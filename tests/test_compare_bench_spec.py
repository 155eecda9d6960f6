"""Compare's bench is a BenchSpec inside CompareSpec (`--set compare.bench.SETTING=VALUE`): the race measures it
as given, the settings it replaced are one error line naming their new path, and a study recorded before it
was one (bench_batch_sizes, bench_seconds, bench_steps; `bench` the results reused) still reads and resumes."""

import os
import shutil
from dataclasses import replace

import pytest
import torch
from conftest import run_cli, tiny_config

import ampgan
from ampgan.bench.harness import BenchSpec
from ampgan.cli.options import own_values
from ampgan.errors import AmpganError
from ampgan.sections import with_settings
from ampgan.study.progress import StudyProgress, open_progress, study_identity
from ampgan.study.spec import COMPARE_BENCH, CompareSpec


def _old_document(spec: CompareSpec, bench_seconds: float = 10.0) -> dict:
    """The spec as the version before this one recorded it: the bench's settings flat, `bench` the results."""
    document = spec.to_document(spec.precisions)
    del document["bench_results"]
    document.update(bench=None, bench_batch_sizes=[16, 64, 256], bench_steps=5, bench_seconds=bench_seconds)
    return document


def test_the_bench_settings_are_set_under_compare_bench_with_their_own_types():
    sets = ("compare.bench.batch_sizes=8,32", "compare.bench.max_seconds=2.5", "compare.bench.attainable=true")
    values = own_values(CompareSpec(), "compare.", {"sets": sets + ("compare.seeds=2", "bench.steps=9")})
    assert values["seeds"] == 2 and "steps" not in values  # bench.steps is the bench command's, not this one's
    values = with_settings(CompareSpec(), values, "compare").bench
    assert values == replace(COMPARE_BENCH, batch_sizes=(8, 32), max_seconds=2.5, attainable=True)
    # What is not given is the study's own default, declared once (COMPARE_BENCH), not `ampgan bench`'s.
    assert (values.warmup, values.min_seconds, values.measure_compile_times) == (
        1,
        10.0,
        False,
    )


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ("compare.bench_seconds=1", "it moved to compare.bench.min_seconds"),
        ("compare.bench_batch_sizes=8", "it moved to compare.bench.batch_sizes"),
        ("compare.bench_steps=3", "it moved to compare.bench.steps"),
        ("compare.bench=results.json", "it moved to compare.bench_results"),
        # The study benches its own precisions: its bench has no such setting.
        ("compare.bench.precisions=fp32", "compare has no setting 'bench.precisions'"),
        ("compare.bench.warmup=-1", "compare.bench.warmup must be a whole number of at least 1, got -1"),
        ("compare.bench.max_seconds=soon", "--set compare.bench.max_seconds"),
    ],
)
def test_a_moved_or_wrong_bench_setting_is_one_line_and_nothing_runs(capsys, tmp_path, given, named):
    out = tmp_path / "study"
    code, _, err = run_cli(
        capsys, "compare", "--dataset", "synthetic", "--device", "cpu", "--set", given, "--out", str(out)
    )
    assert code == 2 and named in err and err.count("\n") == 1, err
    assert not out.exists()


@pytest.mark.parametrize(
    ("flag", "path"),
    [("--bench-seconds", "compare.bench.min_seconds"), ("--bench-batch-sizes", "compare.bench.batch_sizes")],
)
def test_the_old_bench_flags_name_their_new_path(capsys, flag, path):
    code, _, err = run_cli(capsys, "compare", "--dataset", "synthetic", flag, "8", "--device", "cpu")
    assert code == 2 and f"{flag} is no option: write --set {path}=VALUE" in err and err.count("\n") == 1, err


def test_the_bench_command_keeps_its_own_settings_and_errors(capsys, tmp_path):
    """The bench command's spec (no nested spec, nothing moved) is read by the same code: a setting it lacks
    is one line naming its settings."""
    values = own_values(BenchSpec(), "bench.", {"sets": ("bench.warmup=3", "compare.seeds=2"), "steps": 4})
    assert values == {"warmup": 3, "steps": 4}
    code, _, err = run_cli(capsys, "bench", "--set", "bench.batch=8", "--out", str(tmp_path / "b"))
    assert code == 2 and "bench has no setting 'batch'" in err and err.count("\n") == 1, err


def test_the_python_api_takes_the_bench_as_a_dict_and_names_moved_settings(tmp_path):
    for call, named in [
        (lambda out: ampgan.compare("acgan", out, bench_seconds=1.0), "'bench_seconds': it moved to bench.min_seconds"),
        (lambda out: ampgan.compare("acgan", out, bench={"precisions": ["fp32"]}), "has no setting 'bench.precisions'"),
        (lambda out: ampgan.compare("acgan", out, bench="results.json"), "bench_results=PATH"),
    ]:
        with pytest.raises(AmpganError) as refused:
            call(tmp_path / "out")
        assert named in str(refused.value) and "\n" not in str(refused.value)
        assert not (tmp_path / "out").exists()


def test_the_race_benches_the_specs_bench_with_the_studys_own_fields(monkeypatch, tmp_path):
    """study/race.py copies nothing by hand: the BenchSpec measured is the spec's, with the study's base,
    precisions, batch size, memory format and compile setting."""
    from ampgan.study import race

    measured = []

    class Measured(Exception):
        pass

    def fake_run_bench(spec, device, dataset=None):
        measured.append(spec)
        raise Measured

    monkeypatch.setattr(race, "run_bench", fake_run_bench)
    bench = replace(COMPARE_BENCH, batch_sizes=(16, 4), warmup=3, steps=7, min_seconds=0.5, max_seconds=2.0)
    spec = CompareSpec(base=tiny_config(), bench=bench, channels_last=("bf16",), compile=("bf16",))
    progress = open_progress(tmp_path, spec.to_document(("fp32", "bf16")))
    with pytest.raises(Measured):
        race.bench_once(spec, None, ("fp32", "bf16"), torch.device("cpu"), lambda line: None, tmp_path, progress)
    expected = replace(
        bench, base=spec.base, batch_sizes=(4, 8, 16), precisions=("fp32", "bf16"), channels_last=("bf16",)
    )
    assert measured == [replace(expected, compile=("bf16",))]


def test_a_spec_recorded_before_the_bench_was_a_benchspec_reads_as_one(tmp_path):
    spec = CompareSpec(base=tiny_config(), seeds=2)
    study = tmp_path / "study"
    read = CompareSpec.from_document(_old_document(spec, bench_seconds=0.3), study, study / "study.json")
    # bench_seconds was the least time per batch size, and three times it the most.
    assert read.bench.max_seconds == pytest.approx(0.9)
    assert read == replace(spec, bench=replace(COMPARE_BENCH, min_seconds=0.3, max_seconds=read.bench.max_seconds))
    old = _old_document(spec) | {"bench": "runs/b/results.json"}
    # A recorded place is resolved inside the study (files/paths.py recorded_place).
    assert CompareSpec.from_document(old, study, study / "study.json").bench_results == study / "runs/b/results.json"
    today = CompareSpec.from_document(spec.to_document(spec.precisions), study, study / "study.json")
    assert today == spec  # and today's reads as written


def test_a_study_json_written_before_resumes_and_one_with_other_options_does_not(tmp_path):
    spec = CompareSpec(base=tiny_config())
    now = spec.to_document(spec.precisions)
    old = _old_document(spec)
    StudyProgress(tmp_path / "a", study_identity(old), old, bench_done=True).save()
    progress = open_progress(tmp_path / "a", now)
    # The same study: taken up where it was, its record rewritten as this version records it.
    assert progress.bench_done and progress.spec == now and progress.identity == study_identity(now)
    assert open_progress(tmp_path / "a", now).bench_done

    other = _old_document(spec, bench_seconds=3.0)  # another bench: another study
    StudyProgress(tmp_path / "b", study_identity(other), other).save()
    with pytest.raises(AmpganError, match="holds a study with other options"):
        open_progress(tmp_path / "b", now)
    # An edited file (its identity is not its options' digest) is still refused, upgraded or not.
    StudyProgress(tmp_path / "c", "0" * 20, old).save()
    with pytest.raises(AmpganError, match="holds a study with other options|was edited"):
        open_progress(tmp_path / "c", now)


@pytest.mark.parametrize("deleted", [None, "bench", "runs/fp32-seed0", "runs/bf16-seed0", "runs", "study.json"])
def test_what_a_stopped_study_says_it_kept_is_what_is_still_on_disk(tmp_path, deleted):
    """SIGTERM to a study whose bench/ (or a run's folder) was deleted under it: the message names it as gone,
    never as kept, and points to what resuming will ask for."""
    progress = StudyProgress(tmp_path, "i", {}, bench_done=True)
    progress.mark_run("fp32-seed0", "done", {})
    progress.mark_run("bf16-seed0", "started")
    for name in ("bench/results.json", "runs/fp32-seed0/config.json", "runs/bf16-seed0/config.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    if deleted:
        (shutil.rmtree if (tmp_path / deleted).is_dir() else os.remove)(tmp_path / deleted)
    progress.decided = object()  # the speed decisions are kept in study.json itself
    said = progress.describe()
    stages = {"study.json": "the speed decisions", "bench": "the bench", "runs/fp32-seed0": "run fp32-seed0"}
    stages |= {"runs/bf16-seed0": "run bf16-seed0"}
    gone = [name for where, name in stages.items() if deleted and (where + "/").startswith(deleted + "/")]
    kept, _, after = said.partition("; ")
    assert [name for name in stages.values() if name in kept] == [name for name in stages.values() if name not in gone]
    assert all(name in after for name in gone) and ("deleted since" in after) == bool(gone)
    assert ("stopped at its last checkpoint" in kept) == ("run bf16-seed0" not in gone)


def test_seeds_past_the_largest_are_refused_as_the_spec_is_built():
    """A study's seeds run --seed, --seed + 1, ...: the spec refuses a last one past MAX_SEED when it is built (it
    was checked only when seed_list was first read, which run_study read early for that alone), and checks the
    seed against the count of seeds given, never against the default count it had before the settings."""
    from ampgan.seeds import MAX_SEED
    from ampgan.study.spec import compare_base

    with pytest.raises(AmpganError) as refused:
        CompareSpec(base=compare_base({"seed": MAX_SEED - 1}), seeds=3)
    assert str(refused.value) == f"--seed {MAX_SEED - 1} with --seeds 3 passes the largest seed, {MAX_SEED}"
    spec = with_settings(CompareSpec(), {"seeds": 1}, "ampgan.compare", base=compare_base({"seed": MAX_SEED}))
    assert spec.seed_list == [MAX_SEED]
