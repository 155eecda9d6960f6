"""`ampgan bench --trace-only`: the step's op tables traced on the meta device (bench/op_tables.py on_meta), the very
tables the CPU trace gives, read by `ampgan project` as a bench's; a step the meta device cannot follow is one line."""

from __future__ import annotations

import contextlib
import json
import textwrap

import pytest
import torch
from conftest import run_cli

from ampgan.bench.op_tables import on_meta, trace_op_tables
from ampgan.bench.ops import record_ops
from ampgan.bench.spec import BenchSpec
from ampgan.config import build_config
from ampgan.data.synthetic import make_synthetic
from ampgan.trust import consent_to_import

pytestmark = pytest.mark.real_op_trace  # the step traced for real, on the meta device and on the CPU


@pytest.mark.parametrize(("model", "precision"), [("dcgan", "fp16"), ("r1", "fp32"), ("wgan-gp", "bf16")])
def test_a_step_traced_on_the_meta_device_is_the_cpu_trace_s_op_table(model, precision):
    # fp16: CPU autocast's casts, the loss scaler, batch norm's fp32 statistics; r1: a double backward; wgan-gp in
    # bf16: a penalty through interpolated images under autocast.
    base = build_config({"data.dataset": "synthetic", "model.name": model, "model.width": 4, "data.image_size": 32})
    spec = BenchSpec(base=base, precisions=(precision,))
    dataset = make_synthetic(count=16, image_size=32)
    tables = {}
    for device in ("meta", "cpu"):
        # The asked precision only: the bench is "asked to stop" before the others.
        stop = iter([False])
        lines = []
        traced = trace_op_tables(spec, dataset, torch.device(device), lines.append, lambda: next(stop, True))
        # --trace-only runs nothing else: the whole budget is its trace's, where a bench's trace has half of it.
        assert f"at most {'100' if device == 'meta' else '50'}% of the bench's --max-seconds" in lines[0]
        tables[device] = traced["op_tables"][precision]
    assert sorted(traced["op_tables"]) == [precision]
    assert tables["meta"]["device"] == "meta" and tables["cpu"]["device"] == "cpu"
    assert tables["meta"]["rows"] == tables["cpu"]["rows"]  # operations, dtypes, FLOPs, bytes, kernels, shares


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_batch_and_instance_norm_keep_the_cpu_s_statistics_dtype_on_the_meta_device(dtype):
    # The CPU saves a 16-bit input's statistics in fp32 beside fp32 weights or running statistics, in the input's
    # dtype without them (an instance norm); the meta kernel always in the input's.
    def run():
        x = torch.randn(2, 8, 4, 4, dtype=dtype)
        for norm in (torch.nn.BatchNorm2d(8), torch.nn.InstanceNorm2d(8), torch.nn.InstanceNorm2d(8, affine=True)):
            norm(x.requires_grad_()).float().sum().backward()

    recorded = {}
    for device in ("cpu", "meta"):
        with on_meta() if device == "meta" else contextlib.nullcontext():
            recorded[device] = [(r.op, r.dtype, r.bytes) for r in record_ops(run)]
    assert recorded["meta"] == recorded["cpu"]


USER_GAN = textwrap.dedent("""
    import torch
    from torch import nn
    import ampgan

    def patch_gan(data, *, item_in_loss=False, trunc_init=False):
        generator = nn.Sequential(nn.Linear(16, data.channels * data.image_size ** 2), nn.Tanh(),
                                  nn.Unflatten(1, (data.channels, data.image_size, data.image_size)))
        if trunc_init:  # rejection sampling: reads the drawn values (the study's AC-GAN initializes so)
            nn.init.trunc_normal_(generator[0].weight, std=0.02, a=-0.04, b=0.04)
        discriminator = nn.Sequential(nn.Conv2d(data.channels, 8, 4, 2, 1), nn.BatchNorm2d(8), nn.LeakyReLU(0.2),
                                      nn.Conv2d(8, 1, 4, 2, 1))

        def d_loss(ctx):
            loss = ampgan.real_fake_loss(ctx.D(ctx.real), 1.0) + ampgan.real_fake_loss(ctx.D(ctx.fake), 0.0)
            return loss * 2 if item_in_loss and loss.item() > 1 else loss

        return ampgan.GAN(generator=generator, discriminator=discriminator, z_dim=16, d_loss=d_loss,
                          g_loss=lambda ctx: ampgan.real_fake_loss(ctx.D(ctx.fake), 1.0))
""")


@pytest.fixture
def user_gan(tmp_path):
    path = tmp_path / "patch_gan.py"
    path.write_text(USER_GAN)
    name = f"{path}:patch_gan"
    consent_to_import(name)
    return name


def test_a_user_gan_traced_on_the_meta_device_at_its_size_projects_and_says_so(user_gan, tmp_path, capsys, monkeypatch):
    import ampgan.system.memory as memory

    # A step this machine has no memory for is traced all the same: the meta device allocates nothing.
    monkeypatch.setattr(memory, "available_memory_bytes", lambda device="cpu": 16 * 2**20)
    out = tmp_path / "traced"
    code, printed, err = run_cli(
        capsys, "bench", "--trace-only", "--model", user_gan, "--image-size", "128", "--batch-sizes", "4,64",
        "--out", str(out),
    )  # fmt: skip
    assert code == 0, err
    assert "on the meta device (the step traced, neither run nor timed)" in printed
    document = json.loads((out / "op_tables.json").read_text())
    assert document["configs"] == [] and document["spec"]["batch_sizes"] == [4, 64]
    assert sorted(document["op_tables"]) == ["bf16", "fp16", "fp32"]
    assert all(table["device"] == "meta" for table in document["op_tables"].values())
    assert document["step_memory"]["parameters_bytes"] > 0
    # No time of this machine's in it: nothing measured to show beside the projection.
    assert not any("seconds" in key or key == "stats" for key in document if key != "op_tables_seconds")

    code, printed, err = run_cli(capsys, "project", str(out), "--devices", "V100")
    assert code == 0, err
    rows = json.loads((out / "projection" / "projection.json").read_text())["rows"]
    assert {(r["precision"], r["batch_size"]) for r in rows if r["status"] == "ok"} == {
        ("fp32", 4), ("fp16", 4), ("fp32", 64), ("fp16", 64)
    }  # fmt: skip
    assert "Projected, not measured" in printed and "traced on the meta device (the step traced, neither run" in printed
    assert "Measured on this machine" not in printed


def test_a_loss_that_reads_a_value_is_refused_in_one_line_naming_the_op_and_the_fix(user_gan, tmp_path, capsys):
    out = tmp_path / "traced"
    code, printed, err = run_cli(
        capsys, "bench", "--trace-only", "--model", user_gan, "--set", "model.item_in_loss=true",
        "--image-size", "32", "--out", str(out),
    )  # fmt: skip
    assert code == 2, err
    [line] = err.strip().splitlines()
    assert "cannot be traced on the meta device: aten._local_scalar_dense reads a tensor's value (.item()" in line
    assert "D update" in line or "d_loss" in line
    assert line.endswith("bench it with the real trace instead (ampgan bench without --trace-only)")
    assert "Traceback" not in err and not out.exists()  # nothing written that could not be projected


def test_weights_initialized_by_reading_values_are_made_before_the_meta_trace(user_gan, tmp_path, capsys):
    """trunc_normal_ draws until its values lie in [a, b]: building the GAN inside the fake mode stopped the trace of
    the study's own AC-GAN as 'reads a tensor's value'. The weights are made with values, then made fake."""
    out = tmp_path / "traced"
    code, _, err = run_cli(
        capsys, "bench", "--trace-only", "--model", user_gan, "--set", "model.trunc_init=true",
        "--image-size", "32", "--precisions", "fp32", "--out", str(out),
    )  # fmt: skip
    assert code == 0, err
    assert json.loads((out / "op_tables.json").read_text())["op_tables"]["fp32"]["device"] == "meta"


def test_the_python_api_traces_on_the_meta_device_as_the_command_does_and_projects_it(user_gan, tmp_path):
    import ampgan

    benched = ampgan.bench(
        user_gan, tmp_path / "traced", trace_only=True, settings={"data.image_size": 64}, batch_sizes=[4, 64],
        precisions=["fp32", "fp16"],
    )  # fmt: skip
    assert benched.device == "meta" and benched.configs == [] and benched.speedups == []
    document = json.loads(benched.results.read_text())
    assert benched.results.name == "op_tables.json" and {"fp16", "fp32"} <= set(document["op_tables"])
    assert all(table["device"] == "meta" for table in document["op_tables"].values())
    projected = ampgan.project(benched.results, devices="T4", batch_sizes=[64])
    row = projected.row("T4", "fp16", 64)
    assert row["status"] == "ok" and row["projected"] is True and row["ms_low"] < row["ms_per_step"] < row["ms_high"]


def test_a_trace_only_bench_refuses_what_cannot_be_traced_before_tracing_and_leaves_a_taken_folder_alone(
    user_gan, tmp_path, monkeypatch
):
    import ampgan
    import ampgan.projection.tables as tables
    from ampgan.errors import AmpganError

    def never(*args, **kwargs):
        raise AssertionError("traced before refusing")

    monkeypatch.setattr(tables, "trace_op_tables", never)

    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine.txt").write_text("kept")
    for settings, refused in (
        ({"precisions": ["fp33"]}, "fp33"),
        ({"batch_sizes": [0]}, "batch"),
        ({"trace_ops": False}, "--no-trace"),
    ):
        with pytest.raises(AmpganError, match=refused):
            ampgan.bench(user_gan, tmp_path / "new", trace_only=True, **settings)
        assert not (tmp_path / "new").exists()
    # a folder that holds something else is refused before the trace, not after it
    with pytest.raises(AmpganError, match="already holds files"):
        ampgan.bench(user_gan, taken, trace_only=True)
    assert [p.name for p in taken.iterdir()] == ["mine.txt"]
