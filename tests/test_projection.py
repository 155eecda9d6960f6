"""The projection onto GPUs this machine does not have: the kernel and step models against hand-computed
cases, the op table of a real step, and `ampgan project` end to end with its failure modes."""

import csv
import json
import math
import re
from importlib.resources import files

import numpy as np
import pytest
import torch
from conftest import run_cli
from torch import nn

from ampgan.bench.ops import OpRecord, OpRow, OpTable, affine_rows, flops_of, kind_of, record_ops
from ampgan.errors import AmpganError
from ampgan.precisions import FP32, TF32
from ampgan.projection.composition import composed_speedup, composed_step, load_composition, step_parts
from ampgan.projection.kernel_model import (
    MISALIGNED_GEMM_CUBLAS11,
    PATH_PARAMETERS,
    TILES,
    _tile_utilisation,
    calibration_for,
    features,
    irregular,
    load_calibration,
    padded,
    pads_channels,
    peak_tflops,
    predict_seconds,
    unmeasured_terms,
)
from ampgan.projection.kernels import Kernel
from ampgan.projection.step_model import kernel_times, speedup_band, step_estimate
from ampgan.system.gpus import GpuSpec, gpu_spec, gpu_table, parse_gpu_table

pytestmark = pytest.mark.real_op_trace

TENSOR_GPU = GpuSpec(
    key="X",
    name="Test X",
    peak_tflops={"fp32": 10.0, "tf32": 40.0, "bf16": 100.0, "fp16": 100.0},
    fp16_units="tensor",
    bandwidth_gbs=1000.0,
    memory_gib=16,
    cuda_capability=(8, 0),
    generation="ampere",
    calibration="",
    source="test",
    checked="test",
    sms=80,
)
HALF2_GPU = GpuSpec(
    key="P",
    name="Test P",
    peak_tflops={"fp32": 10.0, "tf32": None, "bf16": None, "fp16": 20.0},
    fp16_units="half2",
    bandwidth_gbs=1000.0,
    memory_gib=16,
    cuda_capability=(6, 0),
    generation="pascal",
    calibration="pascal",
    source="test",
    checked="test",
    sms=56,
)
N = 4096


def row(
    op="aten.mm",
    unit="matrix",
    dtype="float16",
    alignment=8,
    flops=2.0 * N**3,
    data=3.0 * N * N * 2,
    weight=1.0,
    flops_slope=0.0,
    bytes_slope=0.0,
    kernels=(),
):
    return OpRow(op, unit, dtype, alignment, (flops, flops_slope), (data, bytes_slope), False, weight, kernels)


def test_a_kernel_s_arithmetic_and_implicit_gemm_by_hand():
    conv = Kernel(
        "c", "conv_fwd", batch=8, c=3, h=32, w=32, out_channels=64, r=4, s=4, pad_h=1, pad_w=1, stride_h=2, stride_w=2
    )
    assert conv.output_hw == (16, 16)  # (32 + 2 - 4) // 2 + 1
    assert conv.implicit_gemm() == (8 * 16 * 16, 64, 3 * 4 * 4)
    assert conv.flops() == 2.0 * 8 * 64 * 16 * 16 * 3 * 16
    assert conv.elements() == 8 * 3 * 32 * 32 + 64 * 3 * 16 + 8 * 64 * 16 * 16
    data = Kernel(
        "d",
        "conv_bwd_data",
        **{
            f: getattr(conv, f)
            for f in ("batch", "c", "h", "w", "out_channels", "r", "s", "pad_h", "pad_w", "stride_h", "stride_w")
        },
    )
    assert data.implicit_gemm() == (8 * 32 * 32, 3, 64 * 16) and data.flops() == conv.flops()


def test_tile_and_wave_quantisation_over_the_multiprocessors():
    # 80 tiles of 128x128 fill 80 SMs exactly; one tile leaves 79 idle unless K is long enough to split
    full = _tile_utilisation(1280, 1024, 128, 80)
    assert full[TILES.index((128, 128))] == pytest.approx(0.0)
    one = _tile_utilisation(128, 128, 128, 80)
    assert one[TILES.index((128, 128))] == pytest.approx(math.log(1 / 80))
    split = _tile_utilisation(128, 128, 128 * 256, 80)  # K / 256 = 128 splits: 80 of them fill the GPU
    assert split[TILES.index((128, 128))] == pytest.approx(0.0)
    # 129 rows need 2 tiles of 128: the second is almost empty
    ragged = _tile_utilisation(129 * 10, 1024, 128, 80)
    assert ragged[TILES.index((128, 128))] == pytest.approx(math.log(1290 / 1280 / 2 * 160 / 160))


def test_the_model_at_neutral_parameters_is_the_roofline_plus_a_launch():
    # base 0 (100% of peak), no tile-size cost, K0 -> 0, no other effect; 1 us launch, full bandwidth
    path = np.zeros(len(PATH_PARAMETERS))
    path[PATH_PARAMETERS.index("log_small_k")] = -30.0
    shared = np.array([math.log(1e-6), 0.0])
    big = Kernel("g", "gemm", m=1280, n=1024, k=4096)  # 80 tiles of 128x128: one full wave
    seconds, compute, memory = predict_seconds(
        features([big], 80, "fp16", pads_channels=True), path, shared, 100.0, 1000.0, 2
    )
    assert compute[0] == pytest.approx(2 * 1280 * 1024 * 4096 / 100e12)
    assert memory[0] == pytest.approx((1280 * 4096 + 4096 * 1024 + 1280 * 1024) * 2 / 1000e9)
    assert seconds[0] == pytest.approx(1e-6 + (compute[0] ** 4 + memory[0] ** 4) ** 0.25)


def test_a_p100_runs_autocast_s_16_bit_products_at_its_fp32_rate_and_a_t4_on_tensor_cores():
    assert peak_tflops(HALF2_GPU, "fp16") == 10.0 and peak_tflops(TENSOR_GPU, "fp16") == 100.0
    assert peak_tflops(TENSOR_GPU, "tf32") == 40.0
    assert calibration_for(gpu_spec("P100"))[0].architecture == "pascal"
    assert calibration_for(gpu_spec("V100"))[1] is True and calibration_for(gpu_spec("T4"))[1] is False


def test_element_wise_work_is_bandwidth_plus_a_launch_gap_and_many_tiny_ops_are_host_bound():
    relu = row(op="aten.relu", unit="memory", dtype="float32", flops=0.0, data=4e8)
    timed = step_estimate([relu], 1, TENSOR_GPU, "fp32", dispatch_s=0.0)
    assert timed.seconds == pytest.approx(4e8 / (1000e9 * 0.75) + 4e-6)  # mid bandwidth fraction and launch gap
    assert timed.low == pytest.approx(4e8 / (1000e9 * 0.90) + 2e-6)
    assert timed.high == pytest.approx(4e8 / (1000e9 * 0.60) + 6e-6)
    tiny = row(op="aten.add", unit="memory", dtype="float32", flops=0.0, data=16.0, weight=1000)
    hosted = step_estimate([tiny], 1, TENSOR_GPU, "fp32", dispatch_s=10e-6)
    assert hosted.bound == "host" and hosted.seconds == pytest.approx(1000 * 10e-6)
    assert hosted.high == pytest.approx(1000 * 10e-6 + 1000 * (6e-6 + 16 / 600e9))  # host and GPU in series


def test_a_speedup_band_holds_its_mid_and_is_wider_without_a_calibration():
    conv = (("conv_fwd", tuple((float(d), 0.0) for d in (256, 64, 32, 32, 128, 3, 3, 1, 1, 1, 1))),)
    rows32 = [row(dtype="float32", kernels=conv)]
    rows16 = [row(kernels=conv)]
    widths = {}
    for key in ("V100", "T4"):
        gpu = gpu_spec(key)
        mid, low, high = speedup_band(
            step_estimate(rows32, 1, gpu, "fp32", 0.0), step_estimate(rows16, 1, gpu, "fp16", 0.0)
        )
        assert low < mid < high and mid > 1.5  # an aligned 3x3 convolution gains on tensor cores
        widths[key] = high / low
    assert widths["T4"] > widths["V100"] * 1.5  # x1.27 each way for an architecture no table calibrates


def test_record_ops_counts_kernels_flops_and_bytes_and_skips_views():
    linear = nn.Linear(16, 8)
    x = torch.randn(4, 16)

    def run():
        y = linear(x).view(-1).relu()
        y.sum().backward()

    records = record_ops(run)
    ops = [r.op for r in records]
    assert "aten.view" not in ops and "aten.t" not in ops and "aten.detach" not in ops
    addmm = next(r for r in records if r.op == "aten.addmm")
    assert addmm.unit == "matrix" and addmm.flops == 2 * 4 * 16 * 8 and addmm.alignment == 4  # M = 4
    # reads bias (8) + x (4x16) + weight (16x8), writes (4x8), all fp32
    assert addmm.bytes == 4 * (8 + 64 + 128 + 32)
    relu = next(r for r in records if r.op == "aten.relu")
    assert relu.unit == "memory" and relu.bytes == 4 * (32 + 32) and relu.flops == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_attention_traced_on_the_cpu_is_matrix_work_with_its_products(dtype):
    """A transformer GAN's attention (nn.MultiheadAttention, F.scaled_dot_product_attention) runs the CPU's own
    fused kernel, which torch's FLOP table lacks: it was a memory op of 0 FLOPs, dropped from the projection's
    matrix work. It is the two products forward and five backward the CUDA kernel's formula counts."""
    attention = nn.MultiheadAttention(32, 4, batch_first=True)
    tokens = torch.randn(2, 16, 32, requires_grad=True)  # (B, N, C): 4 heads of 8

    def run():
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            out = attention(tokens, tokens, tokens, need_weights=False)[0]
        out.float().sum().backward()

    fused = {r.op: r for r in record_ops(run) if "attention" in r.op}
    assert len(fused) == 2, list(fused)
    per_product = 2 * (2 * 4) * 16 * 16 * 8  # 2 FLOPs x (batch x heads) x 16 x 16 x 8
    for row in fused.values():
        products = 5 if row.op.endswith("backward") else 2
        assert row.unit == "matrix" and row.flops == products * per_product and len(row.kernels) == products
        assert sum(2 * m * n * k for _, (m, n, k, *_) in row.kernels) == row.flops


def test_cuda_s_other_fused_attention_kernels_and_a_cpu_lstm_are_matrix_work_with_their_products():
    """CUDA's memory-efficient and cuDNN attention kernels (what SDPA picks where flash cannot run) were memory ops,
    their FLOPs dropped from the matrix work; an nn.LSTM on the CPU (oneDNN's layer) was 0 FLOPs of memory work."""
    aten, query = torch.ops.aten, torch.randn(2, 4, 16, 8, device="meta")  # (batch, heads, tokens, head size)
    nothing = torch.empty(0, device="meta")

    def attention():
        out, lse, seed, offset = aten._scaled_dot_product_efficient_attention(query, query, query, None, True)
        aten._scaled_dot_product_efficient_attention_backward(
            out, query, query, query, nothing, out, lse, seed, offset, 0.0, [True, True, True, False]
        )
        out, lse, cum_q, cum_k, _, _, seed, offset, _ = aten._scaled_dot_product_cudnn_attention(
            query, query, query, None, True
        )
        aten._scaled_dot_product_cudnn_attention_backward(
            out, query, query, query, out, lse, seed, offset, nothing, cum_q, cum_k, 16, 16, 0.0, False
        )

    per_product = 2 * (2 * 4) * 16 * 16 * 8
    for row in record_ops(attention):
        products = 5 if row.op.endswith("backward") else 2
        assert row.unit == "matrix" and row.flops == products * per_product and len(row.kernels) == products, row

    lstm, steps = nn.LSTM(12, 20, batch_first=True), torch.randn(3, 5, 12)  # batch 3, 5 steps
    rows = {r.op: r for r in record_ops(lambda: lstm(steps)[0].sum().backward()) if "rnn" in r.op}
    forward = 2 * (3 * 5) * (4 * 20) * (12 + 20)  # the input's and the hidden state's products with the 4 gates
    assert {op: (r.unit, r.flops) for op, r in rows.items()} == {
        "aten.mkldnn_rnn_layer": ("matrix", forward),
        "aten.mkldnn_rnn_layer_backward": ("matrix", 2 * forward),
    }


@pytest.mark.parametrize("transposed", [False, True])
def test_a_3d_convolution_is_projected_as_the_implicit_gemms_it_runs(transposed):
    """A video GAN's Conv3d (and ConvTranspose3d) had no kernel shapes: the projection took each as one square
    product of its FLOPs, labelled 'an older trace' (a cube of ~1000 runs tensor cores near peak; the real
    product is 8-16 channels wide) and in fp32 under PyTorch's default. Its passes are 2-D ones with its implicit
    GEMMs (a 1x1 filter over in channels x filter volume), with exactly torch's FLOPs."""
    layer = (nn.ConvTranspose3d(6, 8, (4, 4, 4), (1, 2, 2), (0, 1, 1)) if transposed else
             nn.Conv3d(6, 8, (3, 4, 4), (1, 2, 2), (1, 1, 1), dilation=(2, 1, 1)))  # fmt: skip
    x = torch.randn(2, 6, 5, 8, 8, requires_grad=True)
    convolutions = [r for r in record_ops(lambda: layer(x).sum().backward()) if "convolution" in r.op]
    assert len(convolutions) == 2  # forward, and backward (data and weight gradients)
    for record in convolutions:
        assert len(record.kernels) == (1 if record.op == "aten.convolution" else 2)
        assert all(dims[5:] == (1, 1, 0, 0, 1, 1) for _, dims in record.kernels)  # 1x1, no padding, stride 1
        assert sum(2 * n * c * h * w * k for _, (n, c, h, w, k, *_) in record.kernels) == record.flops
    kind, dims = convolutions[0].kernels[0]
    # (N, C x filter volume, output depth x height, output width, K) of the ordinary convolution
    assert (kind, dims[:5]) == (("conv_bwd_data", (2, 8 * 64, 5 * 8, 8, 6)) if transposed else
                                ("conv_fwd", (2, 6 * 48, 3 * 4, 4, 8)))  # fmt: skip


def test_the_step_cost_is_affine_in_the_batch_and_a_third_batch_checks_it():
    def conv_step(batch):
        conv = nn.Conv2d(8, 16, 3, padding=1)
        torch.manual_seed(0)
        return record_ops(lambda: conv(torch.randn(batch, 8, 12, 12)).sum().backward())

    rows = affine_rows(conv_step(8), conv_step(16), 8, 16)
    table = OpTable("fp32", tuple(rows), (8, 16), "cpu")
    at_24 = conv_step(24)
    assert table.flops_at(24) == pytest.approx(sum(r.flops for r in at_24))
    assert table.bytes_at(24) == pytest.approx(sum(r.bytes for r in at_24))
    assert OpTable.from_dict(json.loads(json.dumps(table.to_dict()))) == table


def test_a_step_whose_operations_change_with_the_batch_is_refused():
    one = [OpRecord("aten.relu", "memory", "float32", 1, 0.0, 64.0, False)]
    other = [OpRecord("aten.add", "memory", "float32", 1, 0.0, 64.0, False)]
    with pytest.raises(AmpganError, match="different operations at batch 8 and 16"):
        affine_rows(one, one + other, 8, 16)


def test_the_gpu_table_has_a_source_for_every_row_and_the_study_s_gpus():
    table = gpu_table()
    assert {"T4", "P100", "V100", "A100", "L4", "H100", "H200"} <= set(table)
    assert all(spec.source.startswith("https://") and spec.checked for spec in table.values())
    assert gpu_spec("t4").peak_tflops["fp16"] == 65 and gpu_spec("P100").tensor_cores is False
    with pytest.raises(AmpganError, match="unknown GPU 'Z9'"):
        gpu_spec("Z9")


@pytest.mark.parametrize(
    "typed, key",
    [
        ("Tesla T4", "T4"),  # as nvidia-smi prints them (the table's name column)
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("nvidia  a100-sxm4-40gb", "A100"),  # case and spacing aside
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("  h100   pcie ", "H100 PCIe"),
        ("a100-80gb", "A100-80GB"),
    ],
)
def test_a_gpu_is_found_by_its_key_or_the_name_nvidia_smi_prints(typed, key):
    assert gpu_spec(typed).key == key


@pytest.mark.parametrize("typed", ["NVIDIA A10G", "B200", "Tesla V100-PCIE-16GB", "H100 SXM"])
def test_a_gpu_not_in_the_table_says_how_to_add_it_and_guesses_nothing(typed):
    # a near name is not the same board (a V100 PCIe is not the table's SXM2): refused, not matched by a token
    with pytest.raises(AmpganError, match=f"unknown GPU '{typed}'.*give --gpus FILE.csv: a row in src/ampgan/system/"):
        gpu_spec(typed)


@pytest.fixture(scope="module")
def tiny_bench(tmp_path_factory):
    from ampgan.cli import main

    out = tmp_path_factory.mktemp("projection") / "bench"
    main(
        [
            "bench",
            "--width",
            "8",
            "--set",
            "model.z_dim=16",
            "--device",
            "cpu",
            "--set",
            "bench.warmup=1",
            "--steps",
            "2",
            "--set",
            "bench.min_seconds=0",
            "--max-seconds",
            "60",
            "--batch-sizes",
            "8",
            "--precisions",
            "fp32",
            "--out",
            str(out),
        ]
    )
    return out / "results.json"


def test_project_writes_one_projected_row_per_gpu_precision_and_batch(tiny_bench, tmp_path, capsys):
    out = tmp_path / "projection"
    code, stdout, err = run_cli(
        capsys, "project", str(tiny_bench), "--devices", "T4,A100", "--batch-sizes", "8,4096", "--out", str(out)
    )
    assert code == 0, err
    document = json.loads((out / "projection.json").read_text())
    assert document["format"] == "ampgan-projection/1" and "PROJECTED" in document["what"]
    rows = {(r["device"], r["precision"], r["batch_size"]): r for r in document["rows"]}
    assert len(rows) == 2 * 4 * 2 and all(r["projected"] for r in rows.values())
    assert rows[("T4", "bf16", 8)]["status"] == "not projected" and "Ampere" in rows[("T4", "bf16", 8)]["reason"]
    for key in (("T4", "fp16", 4096), ("A100", "bf16", 8), ("A100", "fp32", 4096)):
        r = rows[key]
        assert r["status"] == "ok" and r["ms_low"] <= r["ms_per_step"] <= r["ms_high"]
        assert r["speedup_low"] <= r["speedup"] <= r["speedup_high"] and r["bound"] in (
            "compute",
            "memory",
            "launch",
            "host",
        )
        assert "datasheet" in r["source"] and r["cost"]["fast"] <= r["cost"]["mid"] <= r["cost"]["slow"]
    # a batch this machine never ran costs more than one it did
    assert rows[("T4", "fp32", 4096)]["ms_per_step"] > rows[("T4", "fp32", 8)]["ms_per_step"]
    assert [m["projected"] for m in document["measured_here"]] == [False]
    # the CSV read alone says each row is projected, and each cost's currency and instance (it had neither)
    written = list(csv.DictReader((out / "projection.csv").open()))
    assert len(written) == len(rows) and {r["projected"] for r in written} == {"True"}
    assert {(r["currency"], r["instance"].split(" ")[0]) for r in written if r["status"] == "ok"} == {
        (r["cost"]["currency"], r["instance"].split(" ")[0]) for r in rows.values() if r["status"] == "ok"
    }
    assert {r["currency"] for r in written if r["status"] == "ok"} == {"USD"}
    assert (out / "fig_projection.png").read_bytes()[:4] == b"\x89PNG"
    assert "Projected, not measured" in stdout and "Measured on this machine" in stdout


def test_project_failures_are_one_line_and_keep_what_exists(tiny_bench, tmp_path, capsys):
    code, _, err = run_cli(capsys, "project", str(tiny_bench), "--devices", "T4,Z9", "--out", str(tmp_path / "p"))
    assert code == 2 and "unknown GPU 'Z9'" in err and "Traceback" not in err
    damaged = json.loads(tiny_bench.read_text())
    damaged["op_tables"]["fp32"]["rows"][0] = ["aten.mm", "gpu"]
    (tmp_path / "damaged.json").write_text(json.dumps(damaged))
    code, _, err = run_cli(capsys, "project", str(tmp_path / "damaged.json"), "--out", str(tmp_path / "p"))
    assert code == 2 and "fp32 op table is damaged" in err and len(err.strip().splitlines()) == 1
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "mine.txt").write_text("mine")
    code, _, err = run_cli(capsys, "project", str(tiny_bench), "--devices", "T4", "--out", str(kept))
    assert code == 2 and (kept / "mine.txt").read_text() == "mine"


def test_cost_on_a_gpu_instance_prices_projected_times_labelled_so(tiny_bench, tmp_path, capsys):
    code, out, err = run_cli(capsys, "cost", str(tiny_bench), "--instance", "g4dn.xlarge", "--out", str(tmp_path))
    assert code == 0, err
    document = json.loads((tmp_path / "cost.json").read_text())
    assert (
        document["basis"]["projection"] is True and "PROJECTED times, not measured" in document["basis"]["explanation"]
    )
    assert {r["precision"] for r in document["rows"]} == {"fp32", "fp16"}  # a T4 has no bf16 or tf32
    assert "PROJECTED" in err and "PROJECTED" in out and "(projected)" in document["measured_on"]
    # never "measured on" the GPU it was projected onto; the bench's stamp (model, versions) says what made it
    assert "measured on Tesla T4" not in out and "PROJECTED onto Tesla T4, not measured; op tables traced on" in out
    assert "model acgan (width 8" in out and "torch " in out and "ampgan " in out
    # a projected time, its hours and its cost carry their band (the time's, scaled), in the JSON, the CSV and
    # the table; a band is no 95% CI; the CSV says in every row that its times are PROJECTED, and its currency
    written = {(int(r["batch_size"]), r["precision"]): r for r in csv.DictReader((tmp_path / "cost.csv").open())}
    for row in document["rows"]:
        for key, spec in (("seconds_per_batch", ".4f"), ("hours", ",.1f"), ("cost", ",.2f")):
            low, high = row[f"{key}_low"], row[f"{key}_high"]
            assert low < row[key] < high and f"{row[key]:{spec}} [{low:{spec}}-{high:{spec}}]" in out
            assert float(written[row["batch_size"], row["precision"]][f"{key}_high"]) == pytest.approx(high)
        assert row["cost_high"] / row["cost"] == pytest.approx(row["seconds_per_batch_high"] / row["seconds_per_batch"])
    assert {r["currency"] for r in written.values()} == {"USD"}
    assert all(r["times"].startswith("PROJECTED onto Tesla T4, not measured") for r in written.values())
    assert "cost USD [band]" in out and "s/batch [band]" in out and "[95% CI]" not in out
    assert re.search(r"cheapest per sample: .* \(\S+ \[\S+-\S+\] USD per million samples, PROJECTED\)", out), out


def test_the_study_report_shows_the_projection_as_projected_and_refuses_a_damaged_one(tiny_bench, tmp_path, capsys):
    from ampgan.study.report import projection_sections

    code, _, err = run_cli(
        capsys,
        "project",
        str(tiny_bench),
        "--devices",
        "T4,H100",
        "--batch-sizes",
        "64,2048",
        "--out",
        str(tmp_path / "projection"),
    )
    assert code == 0, err
    table, figure = projection_sections(tmp_path)
    assert "PROJECTED" in table.title and table.table[0][0] == "GPU"
    assert [row[:2] for row in table.table[1:]] == [["T4", "64"], ["T4", "2048"], ["H100", "64"], ["H100", "2048"]]
    assert {row[3] for row in table.table[1:]} <= {"fp16", "bf16"} and figure.figure.is_file()
    # an H100 user who changes nothing runs TF32 convolutions: that speedup comes first; no table calibrates Hopper
    h100 = table.table[-1]
    assert h100[5].index("over the default (TF32 convolutions)") < h100[5].index("over strict fp32")
    # Hopper has no published end-to-end rows in the composition's fit; Turing (the T4) has 71
    # (the T4's kernels borrow Volta's model, as the note below the project table says)
    assert h100[-1].startswith("NOT calibrated")
    assert table.table[1][-1] == "calibrated on whole steps; kernels: another architecture's model"
    assert "off by" in table.paragraph and "band holds" in table.paragraph
    document = json.loads((tmp_path / "projection" / "projection.json").read_text())
    # each projected time and cost carries its band, the cost its currency (the cell said "2.69 to 1.43")
    rows = {(r["device"], r["precision"], r["batch_size"]): r for r in document["rows"] if r["status"] == "ok"}
    for cells in table.table[1:]:
        for row, cell in (
            (rows[cells[0], "fp32", int(cells[1])], cells[2]),
            (rows[cells[0], cells[3], int(cells[1])], cells[4]),
        ):
            assert cell == f"{row['ms_per_step']:.1f} [{row['ms_low']:.1f}-{row['ms_high']:.1f}]"
        assert re.fullmatch(r"[\d,.]+ \[[\d,.]+-[\d,.]+\] to [\d,.]+ \[[\d,.]+-[\d,.]+\] USD", cells[7]), cells[7]
    assert table.table[0][2] == "fp32 ms [band]" and "[band]" in table.table[0][7]
    # a projected figure without its band (an 'ok' row missing ms_low was a KeyError traceback), an 'ok' row
    # without its step time, a speedup without its band's end: each one line naming the field
    ok = next(i for i, r in enumerate(document["rows"]) if r["status"] == "ok" and "speedup" in r)
    for key in ("ms_low", "ms_per_step", "speedup_high"):
        damaged = json.loads(json.dumps(document))
        del damaged["rows"][ok][key]
        (tmp_path / "projection" / "projection.json").write_text(json.dumps(damaged))
        with pytest.raises(AmpganError, match=rf"projection.json is damaged or foreign \(rows\[{ok}\]\.{key} is miss"):
            projection_sections(tmp_path)
    document["rows"][0]["batch_size"] = "many"
    (tmp_path / "projection" / "projection.json").write_text(json.dumps(document))
    with pytest.raises(AmpganError, match="projection.json"):
        projection_sections(tmp_path)


def test_the_op_table_of_a_real_training_step_predicts_a_batch_it_was_not_traced_at():
    from conftest import tiny_config

    from ampgan.bench.ops import trace_cycle, trace_op_table
    from ampgan.data import DataConfig, load_dataset
    from ampgan.speed.step_timer import StepTimer

    config = tiny_config()
    dataset = load_dataset(DataConfig(dataset="synthetic"), seed=0)

    def timer(batch_size):
        return StepTimer(
            config.with_fields({"budget.batch_size": batch_size}),
            dataset,
            torch.device("cpu"),
            data_parallel=False,
            across_ranks=False,
        )

    table = trace_op_table(timer, "fp32")
    at_24 = timer(24)
    at_24()
    records = trace_cycle(at_24, at_24.resident_batch())
    assert table.flops_at(24) == pytest.approx(sum(r.flops * r.weight for r in records))
    assert table.bytes_at(24) == pytest.approx(sum(r.bytes * r.weight for r in records))
    assert table.kernels() == pytest.approx(sum(r.weight for r in records))
    assert any(r.optimizer and r.op == "cuda.fused_adam" for r in table.rows)


def test_a_batch_too_large_for_a_gpu_is_flagged_from_the_step_memory_lower_bound(tiny_bench, tmp_path, capsys):
    memory = json.loads(tiny_bench.read_text())["step_memory"]
    assert memory["parameters_bytes"] > 0 and set(memory["activation_bytes_per_sample"]) == {"fp32", "bf16", "fp16"}
    # the 16-bit step keeps its activations in 2 bytes: about half the fp32 bound per sample
    per_sample = memory["activation_bytes_per_sample"]
    assert per_sample["bf16"] == pytest.approx(per_sample["fp32"] / 2, rel=0.01)
    huge = int(16 * 2**30 / per_sample["fp32"]) * 2  # twice what a T4's 16 GiB holds in fp32
    code, stdout, err = run_cli(
        capsys,
        "project",
        str(tiny_bench),
        "--devices",
        "T4,H200",
        "--batch-sizes",
        f"8,{huge}",
        "--out",
        str(tmp_path / "p"),
    )
    assert code == 0, err
    rows = {
        (r["device"], r["precision"], r["batch_size"]): r
        for r in json.loads((tmp_path / "p" / "projection.json").read_text())["rows"]
    }
    assert rows[("T4", "fp32", 8)]["fits"] is True and rows[("T4", "fp32", huge)]["fits"] is False
    assert rows[("H200", "fp32", huge)]["fits"] is True  # 141 GB holds it
    assert "Does not fit in the GPU's memory" in stdout and f"T4 fp32 at batch {huge}" in stdout


def test_project_reads_the_step_a_study_traced_when_it_ran_no_bench(tiny_bench, tmp_path, capsys):
    from ampgan.projection.tables import TRACED_FORMAT

    bench = json.loads(tiny_bench.read_text())
    study = tmp_path / "study"
    (study / "projection").mkdir(parents=True)
    traced = {
        "format": TRACED_FORMAT,
        "spec": {"model": "acgan", "batch_sizes": [64]},
        "environment": bench["environment"],
        "configs": [],
        "op_tables": bench["op_tables"],
        "step_memory": bench["step_memory"],
    }
    (study / "projection" / "op_tables.json").write_text(json.dumps(traced))
    code, stdout, err = run_cli(capsys, "project", str(study), "--devices", "L4", "--out", str(tmp_path / "p"))
    assert code == 0, err
    rows = json.loads((tmp_path / "p" / "projection.json").read_text())["rows"]
    assert {(r["device"], r["batch_size"]) for r in rows} == {("L4", 64)}
    (study / "projection" / "op_tables.json").write_text(json.dumps({**traced, "spec": {"model": "acgan"}}))
    code, _, err = run_cli(capsys, "project", str(study), "--out", str(tmp_path / "q"))
    assert code == 2 and "op_tables.json" in err and "Traceback" not in err


def test_results_measured_on_a_gpu_of_the_table_put_its_projection_beside_each_measurement(
    tiny_bench, tmp_path, capsys
):
    results = json.loads(tiny_bench.read_text())
    results["hardware"] = {**results["hardware"], "device_type": "cuda", "name": "NVIDIA H200"}
    (tmp_path / "gpu.json").write_text(json.dumps(results))
    code, stdout, err = run_cli(
        capsys, "project", str(tmp_path / "gpu.json"), "--devices", "T4", "--out", str(tmp_path / "p")
    )
    assert code == 0, err
    (measured,) = json.loads((tmp_path / "p" / "projection.json").read_text())["measured_here"]
    assert measured["projected"] is False and measured["projected_for_it_ms"] > 0
    assert measured["measured_over_projected"] == pytest.approx(
        measured["ms_per_step"] / measured["projected_for_it_ms"]
    )
    assert "measured / projected" in stdout


def test_an_op_table_traced_before_kernels_were_recorded_still_projects_and_says_how():
    from ampgan.projection.assumptions import launch_assumption
    from ampgan.projection.document import as_written, projected_rows

    old = ["aten.mm", "matrix", "float16", 8, [0.0, 2e9], [0.0, 4e6], False, 3.0]  # 8 columns: no kernels
    table = OpTable("fp16", (OpRow.from_list(old),), (8, 16), "cpu")
    fp32 = OpTable(
        "fp32",
        (OpRow.from_list(["aten.mm", "matrix", "float32", 8, [0.0, 2e9], [0.0, 8e6], False, 3.0]),),
        (8, 16),
        "cpu",
    )
    rows = as_written(
        projected_rows({"fp16": table, "fp32": fp32}, [gpu_spec("V100")], [64], launch_assumption(5e-6, "test"))
    )
    fp16 = next(r for r in rows if r["precision"] == "fp16")
    assert fp16["status"] == "ok" and "1 matrix ops whose kernels are not described" in fp16["source"]
    assert fp16["speedup_low"] <= fp16["speedup"] <= fp16["speedup_high"] and fp16["calibrated"] is True


def test_the_calibration_column_says_what_the_note_below_it_says_once_per_gpu():
    """T4's band rests on Turing's published whole steps while its kernels borrow Volta's model: the column
    said "calibrated" over a note saying "NO calibration for this architecture"; the note came once per row."""
    from ampgan.cost.catalog import load_catalog
    from ampgan.projection.assumptions import launch_assumption
    from ampgan.projection.document import as_written, projected_rows, table_text

    def table(name, dtype, nbytes):
        row = ["aten.mm", "matrix", dtype, 8, [0.0, 2e9], [0.0, nbytes], False, 3.0]
        return OpTable(name, (OpRow.from_list(row),), (8, 16), "cpu")

    tables = {"fp32": table("fp32", "float32", 8e6), "fp16": table("fp16", "float16", 4e6)}
    gpus = [gpu_spec(name) for name in ("V100", "T4", "H100")]
    rows = as_written(projected_rows(tables, gpus, [64, 2048], launch_assumption(5e-6, "test"), catalog=load_catalog()))
    fitted = {"name": "fitted", "low": 2.5, "high": 2.5, "unit": "factor", "source": "a fit"}
    ranged = {"name": "ranged", "low": 1.0, "high": 3.0, "unit": "factor", "source": "a guess"}
    document = {"model": "m", "traced_on": "cpu", "batches_costed": 1e6, "rows": rows, "measured_here": []}
    text = table_text({**document, "assumptions": [fitted, ranged]})
    cells = {}
    for line in text.splitlines():
        if line.startswith(("| V100 |", "| T4 |", "| H100 |")):
            cells.setdefault(line.split(" | ")[0][2:], set()).add(line.split(" | ")[-1].rstrip(" |"))
    assert cells == {
        "V100": {"calibrated on whole steps"},
        "T4": {"calibrated on whole steps; kernels: another architecture's model"},
        "H100": {"NOT calibrated: band widened; kernels: another architecture's model"},
    }
    notes = [line for line in text.splitlines() if line.startswith("- ") and ": kernels: " in line]
    assert [note.split(":")[0] for note in notes] == ["- H100", "- T4", "- V100"]  # 4 rows each, one note
    t4 = notes[1]
    assert "kernels: NO calibration for this architecture (capability 7.5): volta's" in t4
    assert "whole steps: composition fitted end to end, band from turing" in t4
    assert notes[2].startswith("- V100: kernels: calibrated on V100's architecture (volta")
    assert "- fitted: 2.5 factor (a fit)" in text and "- ranged: 1-3 factor (a guess)" in text
    assert {r["kernels_calibrated"] for r in rows if r["device"] == "T4" and r["status"] == "ok"} == {False}
    # a cost under 10 keeps its cents (0.75 was "1 [0-2]"); the batches written out, not "1e+06"
    costs = [r["cost"] for r in rows if "cost" in r]
    assert min(c["mid"] for c in costs) < 10 <= max(c["mid"] for c in costs)  # both kinds are tried
    for cost in costs:
        digits = 2 if cost["mid"] < 10 else 0
        assert f"| {cost['mid']:,.{digits}f} [{cost['fast']:,.{digits}f}-{cost['slow']:,.{digits}f}] USD |" in text
    assert "cost of 1,000,000 batches at the cheapest catalog instance" in text and "1e+06" not in text


def test_a_transposed_convolution_is_recorded_as_the_ordinary_one_run_the_other_way():
    generator = nn.ConvTranspose2d(64, 1, 4, stride=2, padding=1)  # (B, 64, 14, 14) -> (B, 1, 28, 28)
    z = torch.randn(8, 64, 14, 14, requires_grad=True)
    records = [r for r in record_ops(lambda: generator(z).sum().backward()) if r.unit == "matrix"]
    shape = (8, 1, 28, 28, 64, 4, 4, 1, 1, 2, 2)  # the ordinary convolution 1 -> 64 channels at 28x28
    assert records[0].kernels == (("conv_bwd_data", shape),)
    assert records[1].kernels == (("conv_fwd", shape), ("conv_bwd_weight", shape))


def test_every_committed_projection_reads_with_the_records_and_a_damaged_one_is_one_line():
    """projection.json is described once (projection/document.py's records): the files earlier versions wrote
    (benchmarks/results/, one with `seconds_by_bound`, one without `calibration_error`) read, and a damaged
    row, cost or measured row is one error line naming the field."""
    from pathlib import Path

    from ampgan.projection.document import check_projection

    committed = sorted((Path(__file__).resolve().parents[1] / "benchmarks" / "results").glob("*/projection/*.json"))
    committed = [path for path in committed if path.name == "projection.json"]
    assert len(committed) >= 4
    for path in committed:
        check_projection(json.loads(path.read_text(encoding="utf-8")), str(path), "fix")
    document = json.loads(committed[-1].read_text(encoding="utf-8"))
    ok = next(i for i, row in enumerate(document["rows"]) if row["status"] == "ok")
    damages = {
        f"rows[{ok}].ms_per_step": lambda d: d["rows"][ok].update(ms_per_step="fast"),
        f"rows[{ok}].cost.mid": lambda d: d["rows"][ok]["cost"].pop("mid"),
        "rows[0].device": lambda d: d["rows"][0].pop("device"),
        f"rows[{ok}].speedup": lambda d: d["rows"][ok].update(speedup=float("nan")),
        "measured_here[0].ms_per_step": lambda d: d["measured_here"][0].update(ms_per_step=None),
        "traced_on": lambda d: d.pop("traced_on"),
        # names read back: a model or dataset nobody registered, a row of a GPU the document does not describe (its
        # devices: the shipped rows and a user's --gpus rows alike)
        "model": lambda d: d.update(model="acgna"),
        "dataset": lambda d: d.update(dataset="digitz"),
        "rows[1].device": lambda d: d["rows"][1].update(device="T5"),
    }
    for where, damage in damages.items():
        damaged = json.loads(json.dumps(document))
        damage(damaged)
        with pytest.raises(AmpganError, match=rf"^projection.json is damaged or foreign \({re.escape(where)} "):
            check_projection(damaged, "projection.json", "fix")


def _in(precision: str, step) -> list[OpRecord]:
    """`step`'s operations traced as the bench traces a mode's: under autocast for a 16-bit one."""
    with torch.autocast("cpu", dtype=torch.float16, enabled=precision == "fp16"):
        return record_ops(step)


def _to_rgb_step(out_channels: int, batch: int, precision: str = "fp16") -> list[OpRecord]:
    """A generator's last layer and the gradient back through it: a transposed convolution to `out_channels`
    is the data gradient of an ordinary convolution from that many channels."""
    layer = nn.ConvTranspose2d(64, out_channels, 4, stride=2, padding=1)
    torch.manual_seed(0)
    z = torch.randn(batch, 64, 8, 8, requires_grad=True)
    return _in(precision, lambda: layer(z).sum().backward())


def _to_rgb_rows(out_channels: int, precision: str) -> list[OpRow]:
    return affine_rows(_to_rgb_step(out_channels, 8, precision), _to_rgb_step(out_channels, 16, precision), 8, 16)


@pytest.mark.parametrize("out_channels", [1, 3, 4])
def test_a_16_bit_data_gradient_into_few_channels_no_calibration_measured_widens_the_band_to_both_values(
    out_channels,
):
    """DeepBench has no 1-4 channel data gradient, so the fit left its term at 0; the calibration names it
    with its measured siblings' value, and the projection's band spans the speedup at both."""
    v100 = gpu_spec("V100")
    assert load_calibration("volta").document["unmeasured"]["fp16"]["tiny_c_bwd_data"] < -1  # slow when 16-bit
    fp32, fp16 = (composed_step(_to_rgb_rows(out_channels, p), 2048, v100, p) for p in ("fp32", "fp16"))
    assert fp16.unmeasured_s > 2 * fp16.seconds  # the siblings' value makes the 16-bit kernel far slower
    mid, low, high = composed_speedup(fp32, fp16)
    band = load_composition().bands["volta"]["speedup"]
    other = fp32.unmeasured_s / fp16.unmeasured_s
    assert low == pytest.approx(other * math.exp(band[0])) and high == pytest.approx(mid * math.exp(band[1]))
    assert low < other < mid < high and fp16.high >= fp16.unmeasured_s
    assert "no calibration measured (a 1-4 channel data gradient) at their other value" in fp16.note  # why it is wide


class _KeptFp32(nn.Module):
    """Two equal convolutions, the second kept in fp32 under autocast, as StyleGAN2-ADA keeps its low-resolution
    blocks (its fp32 layers)."""

    def __init__(self, keep: bool):
        super().__init__()
        self.keep = keep
        self.mixed, self.kept = nn.Conv2d(64, 64, 3, padding=1), nn.Conv2d(64, 64, 3, padding=1)

    def forward(self, x):
        y = self.mixed(x)
        if not self.keep:
            return self.kept(y)
        with torch.autocast("cpu", enabled=False):
            return self.kept(y.float())


def _kept_fp32_rows(precision: str, keep: bool = True) -> list[OpRow]:
    def traced(batch):
        model = _KeptFp32(keep)  # a fresh one each time: no gradient to accumulate into
        x = torch.randn(batch, 64, 16, 16, requires_grad=True)
        return _in(precision, lambda: model(x).sum().backward())

    return affine_rows(traced(8), traced(16), 8, 16)


def test_an_op_a_model_keeps_in_fp32_under_a_16_bit_mode_is_costed_in_fp32_off_tensor_cores():
    """Every matrix op of a 16-bit step was costed as 16-bit, whatever dtype the trace saw it compute in: a layer the
    model keeps in fp32 was projected on tensor cores and the step called 100% tensor-core work. It runs as the
    mode's fp32 ops do: strict fp32 under ampgan's modes, which switch TF32 off; a published harness's fp32 side
    (TF32 where it was on) in the validation."""
    rows = _kept_fp32_rows("fp16")
    computed = [r.dtype for r in rows if r.unit == "matrix"]
    assert "float16" in computed and "float32" in computed  # the trace saw both
    a100, v100 = gpu_spec("A100"), gpu_spec("V100")
    estimate = step_estimate(rows, 256, v100, "fp16", 1e-5)
    assert estimate.tensor_flops_share == pytest.approx(0.5, abs=0.02)  # half the FLOPs, the fp32 layer's, off them
    all_fp32, all_16 = (step_estimate(_kept_fp32_rows(p, keep=False), 256, v100, p, 1e-5) for p in ("fp32", "fp16"))
    assert all_fp32.tensor_flops_share == 0.0
    # the fp32 layer costs what it costs in an fp32 step: the mixed step lies between the two, near their mean
    assert all_16.gpu_s < estimate.gpu_s < all_fp32.gpu_s
    parts = {ops: step_parts(rows, 256, a100, "fp16", fp32_ops=ops).matrix_s for ops in (FP32, TF32)}
    assert parts[FP32]["fp32"] > 0 and parts[FP32]["tf32"] == 0  # ampgan's modes: strict fp32
    assert parts[TF32]["tf32"] > 0 and parts[TF32]["fp32"] == 0  # a harness that left TF32 on
    assert parts[FP32]["fp16"] == parts[TF32]["fp16"] > 0  # the autocast layer's kernels, the same either way


def test_pytorch_s_default_runs_a_grouped_convolution_in_tf32_as_every_other_convolution():
    """A grouped convolution has no kernel shapes (its cost is a stand-in product of its FLOPs): it was costed as
    PyTorch's default costs products, in fp32, where cuDNN runs every convolution in TF32 by default."""

    def traced(batch):
        layer = nn.Conv2d(64, 64, 3, padding=1, groups=8)  # a fresh one each time: no gradient to accumulate into
        x = torch.randn(batch, 64, 16, 16, requires_grad=True)
        return record_ops(lambda: layer(x).sum().backward())

    rows = affine_rows(traced(8), traced(16), 8, 16)
    assert any(r.unit == "matrix" and not r.kernels for r in rows)  # the stand-in product
    parts = step_parts(rows, 256, gpu_spec("A100"), "default").matrix_s
    assert parts["tf32"] > 0 and parts["fp32"] == 0


def test_whether_a_gpu_pads_a_convolution_s_channels_is_its_own_row_s():
    """Channel padding was decided by the tensor cores alone: a GPU (or its library) that does not pad could not say
    so. gpus.csv's pads_channels decides it, onto tensor cores only; a row without the column pads where it has them."""
    header, t4 = (files("ampgan.system") / "gpus.csv").read_text("utf-8").splitlines()[:2]
    plain_t4 = t4.replace("T4,Tesla T4", "T4-plain,Plain T4").replace(",0.57,1,http", ",0.57,0,http")
    table = parse_gpu_table("\n".join([header, t4, plain_t4]))
    padding, plain = table["T4"], table["T4-plain"]
    assert [pads_channels(gpu, p) for gpu in (padding, plain) for p in ("fp16", FP32)] == [True, False, False, False]
    assert all(gpu.pads_channels == gpu.tensor_cores for gpu in gpu_table().values())  # every shipped row says so
    # on the padding T4 a 12-channel layer is the 16-channel one; on the other it is left misaligned
    twelve = Kernel("c12", "conv_fwd", batch=16, c=12, h=64, w=64, out_channels=32, r=3, s=3, pad_h=1, pad_w=1)
    sixteen = Kernel("c16", "conv_fwd", batch=16, c=16, h=64, w=64, out_channels=32, r=3, s=3, pad_h=1, pad_w=1)
    volta = load_calibration("volta")
    seconds = [kernel_times([k], g, "fp16", volta, 1.0).seconds[0] for k, g in ((twelve, padding), (sixteen, plain))]
    assert seconds[0] == seconds[1] != kernel_times([twelve], plain, "fp16", volta, 1.0).seconds[0]
    without = ",".join(c for c in header.split(",") if c != "pads_channels")
    assert parse_gpu_table(f"{without}\n{t4.replace(',0.57,1,http', ',0.57,http')}")["T4"].pads_channels is None
    with pytest.raises(AmpganError, match="^mine.csv line 2: pads_channels is 'yes', not a whole number: write"):
        parse_gpu_table(f"{header}\n{t4.replace(',0.57,1,http', ',0.57,yes,http')}", "mine.csv")


def test_a_tensor_core_convolution_is_charged_its_channels_padded_to_the_path_s_alignment():
    """DeepBench padded a 16-bit training kernel's channels to 8 before timing it (conv_bench.cu) and cuDNN pads
    them for tensor cores: a 1-channel layer does 8 channels' work, a 3-channel one 8/3 of its own (TF32: 4/3).
    Its tiny-channel term is what is left beyond that padding, fitted so (unpadded, the V100's 16-bit 1-4
    channel kernels had absorbed the padding: e^-3, which the data gradient's band then took on top of its tile
    waste). Off tensor cores (fp32, a P100's 16-bit) nothing is padded."""
    one = Kernel("c1", "conv_fwd", batch=16, c=1, h=64, w=64, out_channels=30, r=3, s=3, pad_h=1, pad_w=1)
    three = Kernel("c3", "conv_fwd", batch=16, c=3, h=64, w=64, out_channels=30, r=3, s=3, pad_h=1, pad_w=1)
    plain = features([one, three], 80, "fp16", pads_channels=False)
    padded16 = features([one, three], 80, "fp16", pads_channels=True)
    padded32 = features([one, three], 80, "tf32", pads_channels=True)
    assert padded16.flops / plain.flops == pytest.approx([8 * 32 / 30, 8 / 3 * 32 / 30])  # c to 8, k 30 to 32
    assert padded32.flops / plain.flops == pytest.approx([4 * 32 / 30, 4 / 3 * 32 / 30])
    assert padded16.tiny_c[:, 0].tolist() == [1.0, 1.0]  # still 1-4 channel: their term is beyond the padding
    # a 12-channel layer is padded to 16 on tensor cores (no misaligned convolution there), not off them
    twelve = Kernel("c12", "conv_fwd", batch=16, c=12, h=64, w=64, out_channels=32, r=3, s=3, pad_h=1, pad_w=1)
    assert features([twelve], 80, "fp16", pads_channels=True).misaligned_conv.tolist() == [0.0]
    assert features([twelve], 80, "fp16", pads_channels=False).misaligned_conv.tolist() == [1.0]
    volta = load_calibration("volta").document
    for term in ("tiny_c_fwd", "tiny_c_bwd_weight"):  # measured beyond the padding: e^-1.4 to e^-1.7, not e^-3
        assert -2.0 < volta["parameters"]["fp16"][term] < -1.0
    assert -2.0 < volta["unmeasured"]["fp16"]["tiny_c_bwd_data"] < -1.0


def test_a_gemm_is_aligned_by_its_leading_dimensions_and_padded_so_as_deepbench_padded_its_own():
    """cuBLAS's tensor-op rule (column-major) needs the leading dimensions aligned: m and k untransposed and TN,
    m and n for NT, all three for TT; DeepBench's gemm_bench padded its 16-bit GEMMs by it before timing."""
    shapes = {(False, False): (40, 8457, 1536), (True, False): (40, 8457, 1536), (False, True): (40, 8464, 1530)}
    shapes[(True, True)] = (40, 8464, 1536)
    for (a_t, b_t), want in shapes.items():
        gemm = Kernel("g", "gemm", m=35, n=8457, k=1530, transpose_a=a_t, transpose_b=b_t)
        grown = padded(gemm, 8)
        assert (grown.m, grown.n, grown.k) == want and not irregular(grown, "fp16") and irregular(gemm, "fp16")
    assert not irregular(Kernel("g", "gemm", m=1024, n=700, k=512), "fp16")  # off 8 only in n: no leading dim


def test_a_tensor_core_step_counts_padded_convolutions_and_misaligned_gemms_on_tensor_cores():
    """cuDNN pads a 3-channel convolution onto tensor cores (and the model times it so); cuBLAS does not pad a
    GEMM whose leading dimension is off 8, but from cuBLAS 11 runs it there with an align1 kernel (NVIDIA's Matrix
    Multiplication guide; pytorch/pytorch#181718 names the tensorop align1 kernels), so its FLOPs are a tensor-core
    share too (they were counted off them, as before cuBLAS 11)."""
    kernels = [
        Kernel("aligned", "gemm", m=4096, n=4096, k=1536),
        Kernel("k1530", "gemm", m=4096, n=4096, k=1530),
        Kernel("rgb", "conv_fwd", batch=64, c=3, h=32, w=32, out_channels=64, r=3, s=3, pad_h=1, pad_w=1),
    ]
    v100 = gpu_spec("V100")
    assert kernel_times(kernels, v100, "fp16", load_calibration("volta"), 1.0).tensor.tolist() == [1.0, 1.0, 1.0]
    assert kernel_times(kernels, gpu_spec("P100"), "fp16", load_calibration("pascal"), 1.0).tensor.sum() == 0


def test_a_16_bit_gemm_cublas_runs_misaligned_was_never_measured_and_its_other_value_is_the_software_s():
    """DeepBench padded its misaligned 16-bit GEMMs before timing them, so none measured what cuBLAS does with
    one: the fit's 0 is unmeasured. Before cuBLAS 11 it ran off tensor cores (the GEMM at the fp32 path's efficiency
    and this GPU's fp32 peak); from cuBLAS 11, which every projection assumes, it stays on them with an align1
    kernel, e^-0.35 at worst in published times beyond the model's own tiles (it had been off tensor cores for
    every GPU, Ampere and Hopper too, at V100's 8:1 ratio). A Linear layer with an odd width gets a band that spans
    both the fit's value and its software's other one, and counts on tensor cores."""
    volta = load_calibration("volta").document
    gemm = PATH_PARAMETERS.index("gemm")
    v100 = gpu_spec("V100")
    off = math.log(v100.peak_tflops["fp32"] / v100.peak_tflops["fp16"])
    off += volta["parameters"]["fp32"]["gemm"] - volta["parameters"]["fp16"]["gemm"]
    assert volta["unmeasured"]["fp16"]["misaligned_gemm"] == pytest.approx(off) and gemm == 0
    assert "misaligned_conv" not in volta["unmeasured"]["fp16"]  # padded on tensor cores: dead there
    # the calibration's own software (CUDA 10.1) ran it off tensor cores; each GPU's era and peaks decide it now
    t4, a100 = gpu_spec("T4"), gpu_spec("A100")
    assert unmeasured_terms(v100, cublas11=False)["fp16"]["misaligned_gemm"] == pytest.approx(off)
    t4_off = off + math.log(t4.peak_tflops["fp32"] / t4.peak_tflops["fp16"] * v100.peak_tflops["fp16"] / 15.7)
    assert unmeasured_terms(t4, cublas11=False)["fp16"]["misaligned_gemm"] == pytest.approx(t4_off)
    for gpu in (v100, t4, a100):
        terms = unmeasured_terms(gpu)
        assert terms["fp16"]["misaligned_gemm"] == MISALIGNED_GEMM_CUBLAS11 == -0.35
        assert terms["fp16"]["tiny_c_bwd_data"] == volta["unmeasured"]["fp16"]["tiny_c_bwd_data"]  # the others kept

    def linear_step(width: int, batch: int) -> list[OpRecord]:
        layer = nn.Linear(width, 4096)
        x = torch.randn(batch, width, requires_grad=True)
        return _in("fp16", lambda: layer(x).sum().backward())

    odd = affine_rows(linear_step(1530, 8), linear_step(1530, 16), 8, 16)
    fp16 = composed_step(odd, 2048, v100, "fp16")
    assert 1.1 * fp16.seconds < fp16.unmeasured_s < 1.42 * fp16.seconds and fp16.high >= fp16.unmeasured_s
    assert step_estimate(odd, 2048, v100, "fp16", 1e-5).tensor_flops_share == 1.0  # cuBLAS 11 keeps it there
    # the note names the term that moved this step, not every term the calibration left unmeasured
    assert "(a 16-bit GEMM cuBLAS runs misaligned) at their other value" in fp16.note
    assert (
        "(a 1-4 channel data gradient) at their other value"
        in composed_step(_to_rgb_rows(3, "fp16"), 2048, v100, "fp16").note
    )
    even = affine_rows(linear_step(1536, 8), linear_step(1536, 16), 8, 16)
    assert composed_step(even, 2048, v100, "fp16").unmeasured_s == composed_step(even, 2048, v100, "fp16").seconds


def test_a_step_without_an_unmeasured_kernel_keeps_its_generation_s_band_and_pascal_measured_its_own():
    fp32, fp16 = (
        composed_step(_to_rgb_rows(8, p), 2048, gpu_spec("V100"), p) for p in ("fp32", "fp16")
    )  # no tiny term
    assert fp16.unmeasured_s == fp16.seconds and fp32.unmeasured_s == fp32.seconds
    assert "no calibration measured" not in fp16.note
    mid, low, high = composed_speedup(fp32, fp16)
    band = load_composition().bands["volta"]["speedup"]
    assert (low, high) == pytest.approx((mid * math.exp(band[0]), mid * math.exp(band[1])))
    assert "tiny_c_bwd_data" not in load_calibration("pascal").document["unmeasured"]["fp32"]  # the P100's has it
    tiny = _to_rgb_rows(3, "fp16")
    assert composed_step(tiny, 2048, gpu_spec("P100"), "fp16").unmeasured_s == pytest.approx(
        composed_step(tiny, 2048, gpu_spec("P100"), "fp16").seconds
    )


def test_the_projection_figure_labels_its_time_axis_inside_one_decade_and_shades_each_band():
    """4.7-6.1 ms on a log axis has no power of ten in it: the left panel showed no time at all. Each line is
    drawn over its band (it drew the mid alone: a projected time without its band)."""
    from matplotlib import colormaps

    from ampgan.plotting import subplots
    from ampgan.projection.output import _times

    rows = [
        {"device": "T4", "status": "ok", "precision": name, "batch_size": batch, "ms_per_step": ms, "speedup": 0.8}
        | {"ms_low": ms * 0.9, "ms_high": ms * 1.1}
        for name, batch, ms in (("fp32", 16, 4.9), ("fp32", 64, 5.2), ("fp16", 16, 5.9), ("fp16", 64, 6.1))
    ]
    figure, axes = subplots()
    _times(axes, rows, ["T4"], colormaps["tab10"])
    labels = [label.get_text() for label in axes.get_yticklabels()]
    assert len(labels) >= 3 and all(float(label) > 0 for label in labels)
    assert float(labels[0]) <= 4.9 * 0.9 * 1.15 and float(labels[-1]) >= 6.1 * 1.1 / 1.15
    assert [line.get_label() for line in axes.get_lines()] == ["T4 fp32", "T4 fp16"]
    bands = [collection.get_paths()[0].vertices[:, 1] for collection in axes.collections]
    assert [f(b) for b in bands for f in (min, max)] == pytest.approx([4.9 * 0.9, 5.2 * 1.1, 5.9 * 0.9, 6.1 * 1.1])


def test_the_projection_figure_names_its_model_as_the_bench_does_not_as_a_dict():
    from ampgan.projection.output import footer

    document = {"model": "acgan", "model_options": {"width": 8}, "dataset": "digits", "traced_on": "cpu"}
    text = footer(document | {"software": {"torch": "2.13.0", "ampgan": "0.1.0"}})
    assert "| model acgan (width 8) on digits | op tables traced on cpu | torch 2.13.0, ampgan 0.1.0 |" in text
    assert "{" not in text and "model dcgan on digits" in footer(document | {"model": "dcgan", "model_options": {}})


MIXING_GAN = """
import torch

from ampgan.precisions import FP32
from torch import nn

import ampgan


def build(data, *, width=8):
    pixels = data.channels * data.image_size**2
    shape = (data.channels, data.image_size, data.image_size)
    G = nn.Sequential(nn.Linear(16, pixels), nn.Unflatten(1, shape), nn.Tanh())
    D = nn.Sequential(nn.Flatten(), nn.Linear(pixels, 1))

    def g_loss(ctx):
        fake = ctx.fake
        for _ in range(2):  # a second pass of G at random, drawn with the step's generator (style mixing)
            if torch.rand((), generator=ctx.rng, device=ctx.device) < 0.5:
                fake = ctx.generate(ctx.draw()[0])
        return ampgan.real_fake_loss(ctx.D(fake), 1.0)

    return ampgan.GAN(
        generator=G,
        discriminator=D,
        z_dim=16,
        d_loss=lambda ctx: ampgan.real_fake_loss(ctx.D(ctx.real), 1.0) + ampgan.real_fake_loss(ctx.D(ctx.fake), 0.0),
        g_loss=g_loss,
    )
"""


def test_a_step_with_random_branches_drawn_with_the_step_generator_is_projected(tmp_path):
    """Style mixing drawn with ctx.rng (as docs/your-gan.md asks) took other branches in each traced cycle and at
    each trace batch (the draws before a branch are as many as the images), so the step was never projected."""
    from conftest import tiny_config

    from ampgan.bench.ops import trace_op_table
    from ampgan.data import DataConfig, load_dataset
    from ampgan.speed.step_timer import StepTimer

    (tmp_path / "mixing.py").write_text(MIXING_GAN)
    config = tiny_config(model=f"{tmp_path / 'mixing.py'}:build")
    dataset = load_dataset(DataConfig(dataset="synthetic"), seed=0)

    def timer(batch_size):
        config_at = config.with_fields({"budget.batch_size": batch_size})
        return StepTimer(config_at, dataset, torch.device("cpu"), data_parallel=False, across_ranks=False)

    table = trace_op_table(timer, FP32)
    assert table.flops_at(16) > table.flops_at(8) > 0


def test_cudnn_s_rnn_is_matrix_work_with_every_layer_s_and_direction_s_gate_products():
    """aten._cudnn_rnn (nn.LSTM, nn.GRU on CUDA: every layer and direction in one call) had no FLOP formula: a step
    traced on a CUDA machine projected an RNN's products as 0 FLOPs of memory work."""
    aten, (steps, batch, inputs, hidden) = torch.ops.aten, (5, 3, 12, 20)
    x, state = torch.randn(steps, batch, inputs, device="meta"), torch.randn(2 * 2, batch, hidden, device="meta")
    # a 2-layer bidirectional LSTM: per layer and direction w_ih (4H, its input), w_hh (4H, H) and two biases
    weights = [
        torch.randn(*shape, device="meta")
        for layer_input in (inputs, 2 * hidden)
        for _ in range(2)
        for shape in ((4 * hidden, layer_input), (4 * hidden, hidden), (4 * hidden,), (4 * hidden,))
    ]
    args = (x, weights, 4, None, state, state, 2, hidden, 0, 2, False, 0.0, True, True, [], None)
    (row,) = [r for r in record_ops(lambda: aten._cudnn_rnn(*args)) if "rnn" in r.op]
    per_direction = [2 * (steps * batch) * (4 * hidden) * (i + hidden) for i in (inputs, 2 * hidden)]
    forward = 2 * sum(per_direction)
    assert (row.op, row.unit, row.flops, row.alignment) == ("aten._cudnn_rnn", "matrix", forward, 1)  # batch 3
    backward = (x, weights, 4, None, state, state, x, x, None, None, 2, hidden, 0, 2, False, 0.0, True, True, [])
    packet = aten._cudnn_rnn_backward
    for mask, passes in (([True, True, True, True], 2), ([True, False, False, False], 1), ([False] * 3 + [True], 1)):
        assert flops_of(packet, (*backward, None, None, mask), {}, None) == passes * forward
    assert kind_of("aten._cudnn_rnn_backward") == "matmul"


def test_the_projection_table_names_the_software_the_step_was_traced_with():
    """projection.md and `ampgan project`'s printed table named the model and the machine that traced the step,
    not the torch that traced it (its figure and projection.json did): a table read alone lacked its versions."""
    from ampgan.projection.document import table_text

    document = {"model": "m.py:build", "traced_on": "the meta device on AMD EPYC", "batches_costed": 1e6, "rows": []}
    software = {"torch": "2.13.0+cpu", "ampgan": "0.1.0", "python": "3.11.7"}
    first = table_text({**document, "assumptions": [], "measured_here": [], "software": software}).splitlines()[0]
    assert "model m.py:build, traced on the meta device on AMD EPYC with torch 2.13.0+cpu, ampgan 0.1.0)" in first
