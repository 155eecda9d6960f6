"""Never lose a user's files, never mix two runs: claiming, replacing and locking output folders."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch
from conftest import run_cli, writer_in_flight
from fixtures import TINY_RUN, write_quickdraw

from ampgan.cli import NOTHING_HALF_WRITTEN
from ampgan.cost.catalog import load_catalog
from ampgan.data import DataConfig, load_dataset
from ampgan.errors import AmpganError
from ampgan.files.atomic import write_atomically
from ampgan.runs.claim import LOCK, MARKER, claimed_folder

TINY = TINY_RUN


def test_an_empty_or_enclosing_out_is_refused_and_nothing_is_deleted(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "thesis.tex").write_text("years of work")
    for out in ("", ".", str(tmp_path), str(tmp_path.parent)):
        code, _, err = run_cli(capsys, "train", *TINY, "--steps", "1", "--out", out, "--overwrite")
        assert code == 2 and err.startswith("error: --out") and err.count("\n") == 1, (out, err)
    assert (tmp_path / "thesis.tex").read_text() == "years of work"


def test_overwrite_replaces_only_folders_ampgan_wrote(tmp_path, capsys):
    mine = tmp_path / "notes"
    (mine / "docs").mkdir(parents=True)
    (mine / "docs" / "thesis.tex").write_text("keep me")
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "1", "--out", str(mine), "--overwrite")
    assert code == 2 and "no ampgan marker" in err
    assert (mine / "docs" / "thesis.tex").read_text() == "keep me"
    run = tmp_path / "run"
    assert run_cli(capsys, "train", *TINY, "--steps", "2", "--out", str(run))[0] == 0
    assert (run / MARKER).is_file()
    assert run_cli(capsys, "train", *TINY, "--steps", "3", "--out", str(run), "--overwrite")[0] == 0
    assert (run / "checkpoints" / "step-000003.pt").is_file() and not (run / "checkpoints" / "step-000002.pt").exists()
    # a folder a newer ampgan marked (a higher marker format) is refused as a newer ampgan's, not as 'no marker'
    marker = json.loads((run / MARKER).read_text())
    (run / MARKER).write_text(json.dumps(marker | {"format": "ampgan-folder/3"}))
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "1", "--out", str(run), "--overwrite")
    assert code == 2 and "written by a newer ampgan (format ampgan-folder/3; this one reads" in err and "upgrade" in err
    assert err.count("\n") == 1 and (run / "checkpoints" / "step-000003.pt").is_file()
    assert not list(tmp_path.glob(".run.replaced-*"))  # the old run is gone once the new one finished


def test_an_out_that_is_a_link_is_the_folder_it_leads_to(tmp_path, capsys):
    """--out LINK (to scratch space, to another run): the run is made, or replaced by --overwrite, where the link
    leads, and the link stays. --overwrite moved the link aside, emptied its folder through it and made the new run
    in the link's place (the old folder left empty, the link as a '.NAME.replaced-PID' no command settles); a link
    to a folder not made yet was 'cannot create --out (File exists)'. A loop of links is one line."""
    run, link = tmp_path / "run", tmp_path / "link"
    assert run_cli(capsys, "train", *TINY, "--steps", "2", "--out", str(run))[0] == 0
    link.symlink_to("run", target_is_directory=True)
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "1", "--out", str(link))
    assert code == 2 and f"--out {link} already holds files" in err
    assert run_cli(capsys, "train", *TINY, "--steps", "3", "--out", str(link), "--overwrite")[0] == 0
    assert link.is_symlink() and os.readlink(link) == "run"
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-000000.pt", "step-000003.pt"]
    assert (run / "generator.safetensors").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "run"]  # nothing set aside is left
    scratch = tmp_path / "scratch"
    scratch.symlink_to("not-made-yet", target_is_directory=True)
    assert run_cli(capsys, "train", *TINY, "--steps", "1", "--out", str(scratch))[0] == 0
    assert (tmp_path / "not-made-yet" / "generator.safetensors").is_file() and scratch.is_symlink()
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    for out in (loop, loop / "run"):
        code, _, err = run_cli(capsys, "train", *TINY, "--steps", "1", "--out", str(out))
        assert code == 2 and err == (
            f"error: {out} leads through a loop of symbolic links (a link that leads back to itself): remove the "
            "loop or give another path\n"
        )


def test_a_read_only_folder_reopened_names_the_folder_s_fix(tmp_path, capsys, read_only_view):
    """A run on a read-only disk resumed or evaluated has no --out to choose, and no space frees a read-only disk:
    the line said 'choose a writable --out' (reopening) or 'free some space' (any write refused read-only)."""
    run = tmp_path / "run"
    assert run_cli(capsys, "train", *TINY, "--steps", "1", "--out", str(run))[0] == 0
    view = read_only_view(run)
    for command in (["train", "--resume", str(view), "--steps", "2"], ["evaluate", str(view)]):
        code, _, err = run_cli(capsys, *command)
        assert (code, err) == (
            2,
            f"error: cannot write in {view} (Read-only file system): make the folder writable or choose a "
            "writable place\n",
        ), command
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-000000.pt", "step-000001.pt"]
    with pytest.raises(AmpganError, match=r"\(Read-only file system\): make the folder writable or choose a writable"):
        write_atomically(view / "cost.json", lambda stream: stream.write(b"{}"))


def test_a_replacement_that_fails_before_training_puts_the_old_run_back(tmp_path):
    old = tmp_path / "run"
    with claimed_folder(old, overwrite=False, kind="run"):
        write_atomically(old / "config.json", lambda stream: stream.write(b'{"format_version": 1}'))  # as ampgan does
    with pytest.raises(RuntimeError):
        with claimed_folder(old, overwrite=True, kind="run"):
            assert not (old / "config.json").exists()  # the new folder starts empty ...
            raise RuntimeError("out of memory at step 0")
    assert (old / "config.json").read_text() == '{"format_version": 1}'  # ... and the old one came back
    assert not list(tmp_path.glob(".run.replaced-*"))


def test_a_run_that_fails_at_its_first_step_leaves_no_folder(tmp_path, capsys, monkeypatch):
    import ampgan.training.loop as loop

    def out_of_memory(*args, **kwargs):
        raise AmpganError("simulated: not enough memory for this batch")

    monkeypatch.setattr(loop, "train_step", out_of_memory)
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "3", "--out", str(run))
    assert code == 2 and "not enough memory" in err
    assert not run.exists()  # a retry is not refused as "already holds files"


def test_a_second_process_is_refused_while_the_first_holds_the_folder(tmp_path, capsys):
    run = tmp_path / "run"
    assert run_cli(capsys, "train", *TINY, "--steps", "2", "--out", str(run))[0] == 0
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import fcntl, os, sys, time
        fd = os.open({str(run / LOCK)!r}, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a training process holds it
        os.ftruncate(fd, 0); os.pwrite(fd, str(os.getpid()).encode(), 0)
        print("held", flush=True)
        sys.stdin.read()
    """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "5", "--quiet")
        assert code == 2 and f"is in use by another ampgan process (pid {holder.pid})" in err
        code, _, err = run_cli(capsys, "train", *TINY, "--steps", "1", "--out", str(run), "--overwrite")
        assert code == 2 and "in use by another ampgan process" in err
    finally:
        holder.kill()
        holder.wait()
    # The holder died without unlocking: the kernel released its lock, nothing blocks the next claim.
    with claimed_folder(run, overwrite=True, kind="run"):
        pass


def test_two_runs_started_together_on_one_folder_never_mix(tmp_path):
    run = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "ampgan",
        "train",
        *TINY,
        "--steps",
        "30",
        "--no-channels-last",
        "--no-compile",
        "--out",
        str(run),
    ]
    first = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    second = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    results = [(p.wait(timeout=240), p.stderr.read()) for p in (first, second)]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    refusal = next(err for code, err in results if code == 2)
    assert "already holds files" in refusal or "in use by another ampgan process" in refusal
    steps = [line for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(steps) == 3  # one run's records (steps 10, 20, 30), none from the other


def test_quickdraw_manifest_records_only_files_that_loaded(tmp_path):
    folder = write_quickdraw(tmp_path / "qd", classes=("apple",))
    good = np.load(folder / "apple.npy")
    np.save(folder / "apple.npy", np.zeros((5, 28, 28), dtype=np.uint8))  # a bad file first
    with pytest.raises(AmpganError, match="not Quick, Draw! bitmaps"):
        load_dataset(DataConfig(dataset="quickdraw", data_dir=str(folder), classes="apple"))
    np.save(folder / "apple.npy", good)  # replaced by a good one: accepted, not a "checksum mismatch"
    assert len(load_dataset(DataConfig(dataset="quickdraw", data_dir=str(folder), classes="apple"))) > 0


def test_price_catalogs_from_spreadsheets_and_bad_files(tmp_path):
    header = "provider,region,instance,hardware,gpu_count,vcpus,price_per_hour,currency,source,date,note\n"
    row = "aws,us-east-1,g4dn.xlarge,T4,1,4,{price},USD,my invoice,2026-11,\n"
    bom = tmp_path / "bom.csv"
    bom.write_bytes(("\ufeff" + header + row.format(price="0.526")).encode("utf-8"))
    assert load_catalog(bom)[0].price_per_hour == 0.526
    binary = tmp_path / "prices.xlsx"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(AmpganError, match="not a text CSV file"):
        load_catalog(binary)
    infinite = tmp_path / "inf.csv"
    infinite.write_text(header + row.format(price="inf"))
    with pytest.raises(AmpganError, match="price_per_hour is 'inf', not a number"):
        load_catalog(infinite)


def test_image_folders_refuse_links_that_leave_them_and_decompression_bombs(tmp_path):
    import struct
    import zlib

    from fixtures import write_image_folder

    root = write_image_folder(tmp_path / "images")
    elsewhere = write_image_folder(tmp_path / "elsewhere", classes=("secret",))
    (root / "linked").symlink_to(elsewhere / "secret", target_is_directory=True)
    with pytest.raises(AmpganError, match="is a link to .*outside the dataset folder"):
        load_dataset(DataConfig(dataset=f"folder:{root}"))
    (root / "linked").unlink()
    assert len(load_dataset(DataConfig(dataset=f"folder:{root}"))) == 6

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    # A valid PNG header claiming 50000 x 50000 pixels (2.5 gigapixels) and almost no data.
    header = struct.pack(">IIBBBBB", 50000, 50000, 8, 0, 0, 0, 0)
    bomb = (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 100)) + chunk(b"IEND", b"")
    )
    (root / "cats" / "bomb.png").write_bytes(bomb)
    with pytest.raises(AmpganError, match="bomb.png claims more pixels than any dataset image should"):
        load_dataset(DataConfig(dataset=f"folder:{root}"))


def _disk_fills_at_checkpoint(monkeypatch, step: int) -> None:
    """torch.save of checkpoint `step` hits a full disk half-way, as a real one does (the stream's
    write raises ENOSPC, torch reports 'unexpected pos')."""
    import errno
    import io

    import torch

    import ampgan.runs.checkpoint as checkpoint

    real_save = torch.save

    class FullDisk(io.RawIOBase):
        def __init__(self, stream):
            self.stream, self.written = stream, 0

        def writable(self):
            return True

        def write(self, data):
            if self.written > 4096:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.written += len(data)
            return self.stream.write(data)

    def save(payload, stream):
        if payload["step"] == step:
            return real_save(payload, FullDisk(stream))
        return real_save(payload, stream)

    monkeypatch.setattr(checkpoint.torch, "save", save)


def test_a_full_disk_during_a_checkpoint_stops_with_one_line_and_the_run_resumes(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    _disk_fills_at_checkpoint(monkeypatch, step=4)
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "6", "--checkpoint-every", "2", "--out", str(run))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "No space left on device" in err and "checkpoints/step-000002.pt" in err
    assert f"ampgan train --resume {run}" in err
    checkpoints = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert checkpoints == ["step-000000.pt", "step-000002.pt"]  # no temporary file left, nothing damaged
    monkeypatch.undo()
    assert run_cli(capsys, "train", "--resume", str(run), "--quiet")[0] == 0
    assert (run / "checkpoints" / "step-000006.pt").is_file()


def test_a_full_disk_before_any_training_was_saved_leaves_no_folder(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    _disk_fills_at_checkpoint(monkeypatch, step=0)
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "6", "--out", str(run))
    assert code == 2 and err.count("\n") == 1 and "run the command again" in err, err
    assert not run.exists()


def test_generate_refuses_unusable_destinations_before_any_work(tmp_path, capsys):
    run = tmp_path / "run"
    assert run_cli(capsys, "train", *TINY, "--steps", "1", "--out", str(run))[0] == 0
    (tmp_path / "afile").write_text("x")
    (tmp_path / "kept.png").write_bytes(b"my picture")
    cases = {
        str(tmp_path / "afile" / "x.png"): "cannot create the folder",
        str(tmp_path / "out.txt"): "ending in .png or .npz",
        str(tmp_path): "is a folder",
        str(tmp_path / "kept.png"): "already exists",
    }
    for out, reason in cases.items():
        code, _, err = run_cli(capsys, "generate", str(run), "--class", "0", "--n", "4", "--out", out)
        assert code == 2 and reason in err and err.count("\n") == 1, (out, err)
    assert (tmp_path / "kept.png").read_bytes() == b"my picture"
    code, _, err = run_cli(
        capsys, "generate", str(run), "--class", "0", "--out", str(tmp_path / "a.png"), "--format", "npz"
    )
    assert code == 2 and "ending in .npz" in err
    # A destination whose filesystem refuses the write at the last moment (here /proc) is one line too.
    code, _, err = run_cli(capsys, "generate", str(run), "--class", "0", "--n", "4", "--out", "/proc/ampgan-x.png")
    assert code == 2 and err.startswith("error:") and err.count("\n") == 1, err
    code, _, _ = run_cli(
        capsys, "generate", str(run), "--class", "0", "--n", "4", "--out", str(tmp_path / "kept.png"), "--overwrite"
    )
    assert code == 0 and (tmp_path / "kept.png").read_bytes().startswith(b"\x89PNG")


def test_a_batch_that_cannot_fit_is_refused_with_the_estimate_before_anything_is_written(tmp_path, capsys):
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "train", *TINY[:-3], "--steps", "1", "--batch-size", "1000000000", "--out", str(run))
    assert code == 2 and err.count("\n") == 1, err
    assert "--batch-size 1000000000 needs at least" in err and "TiB" in err and "memory available now" in err
    assert not run.exists()


def test_the_memory_estimate_counts_every_layer_output_of_the_step_and_adam_state(monkeypatch):
    from ampgan.gan import DataSpec, resolve_model
    from ampgan.gan.registry import build_on_meta
    from ampgan.training import memory

    data = DataSpec(image_size=32, channels=3, num_classes=4)
    recipe = resolve_model("acgan", {"width": 8, "z_dim": 16})
    gan = build_on_meta(recipe, data)
    # Per sample. G (32 px, width 8): embedding 16; linear + bn + relu 3 x 512; deconv + bn + relu
    # 3 x 16x8x8 and 3 x 8x16x16; deconv + tanh 2 x 3x32x32. D, once for the real and once for the fake
    # batch: conv + leaky 2 x 8x16x16, conv + bn + leaky 3 x 16x8x8, conv + bn + leaky 3 x 32x4x4,
    # flatten 512, heads 1 + 4.
    g = 16 + 3 * 512 + 3 * 1024 + 3 * 2048 + 2 * 3072
    d = 2 * 8 * 16 * 16 + 3 * 16 * 8 * 8 + 3 * 32 * 4 * 4 + 512 + 1 + 4
    parameters = sum(p.numel() for m in (gan.generator, gan.discriminator) for p in m.parameters())
    estimate = memory.estimate_step_memory(gan, data, batch_size=10, compute_bytes=2)
    assert estimate.activations_bytes == (g + 2 * d) * 10 * 2
    assert estimate.parameters_bytes == parameters * 4 * 4
    # Injected machine sizes: refused with the largest batch that fits by the same estimate.
    monkeypatch.setattr(memory, "available_memory_bytes", lambda device: estimate.total_bytes - 1)
    with pytest.raises(AmpganError, match="use a batch size of at most 9$"):
        memory.refuse_what_cannot_fit(gan, data, 10, torch.device("cpu"), 2)
    monkeypatch.setattr(memory, "available_memory_bytes", lambda device: estimate.total_bytes)
    memory.refuse_what_cannot_fit(gan, data, 10, torch.device("cpu"), 2)  # fits exactly: no error
    # Not even batch norm's 2 images fit: no batch size would, so the advice is a smaller model.
    monkeypatch.setattr(memory, "available_memory_bytes", lambda device: estimate.total_bytes_at(2) - 1)
    with pytest.raises(AmpganError, match="no batch size fits; make the model smaller") as refused:
        memory.refuse_what_cannot_fit(gan, data, 10, torch.device("cpu"), 2)
    assert "batch size of at most" not in str(refused.value)


def test_unwritable_out_folders_are_one_line_each(tmp_path, capsys, monkeypatch):
    import errno
    import pathlib

    (tmp_path / "afile").write_text("x")
    cases = {"/proc/ampgan-x": "No such file or directory", str(tmp_path / "afile" / "sub"): "Not a directory"}
    for out, reason in cases.items():
        code, _, err = run_cli(capsys, "train", *TINY, "--steps", "1", "--out", out)
        assert code == 2 and f"cannot create --out {out} ({reason})" in err and err.count("\n") == 1, err
    # A read-only filesystem (injected: root ignores permission bits, and mounting needs privileges).
    real_mkdir = pathlib.Path.mkdir

    def read_only(self, *args, **kwargs):
        if self.is_relative_to(tmp_path / "ro"):
            raise OSError(errno.EROFS, "Read-only file system")
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "mkdir", read_only)
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "1", "--out", str(tmp_path / "ro" / "run"))
    assert code == 2 and "(Read-only file system): choose a writable folder" in err and err.count("\n") == 1, err


def test_a_write_into_a_held_folder_moved_or_deleted_meanwhile_never_makes_it_again(tmp_path):
    """Moved, deleted, or replaced by another folder of its name: a write at the old name is refused in one line
    instead of making a new folder there that holds the last few files without the ones that explain them."""
    import shutil

    from ampgan.errors import UnwritableFile

    def move(folder):
        folder.rename(folder.with_name("moved-" + folder.name))

    def replace(folder):
        move(folder)
        (folder / "figures").mkdir(parents=True)
        (folder / LOCK).write_text("0")

    for name, meddle in {"moved": move, "deleted": shutil.rmtree, "replaced": replace}.items():
        out = tmp_path / name
        refused = f"{name} was moved or deleted while ampgan wrote in it\\): put the folder back where it was"
        with pytest.raises(UnwritableFile, match=refused):
            with claimed_folder(out, overwrite=False, kind="bench"):
                write_atomically(out / "results.json", lambda stream: stream.write(b"{}"))
                meddle(out)
                write_atomically(out / "figures" / "fig1.png", lambda stream: stream.write(b"png"))
        assert not (out / "figures" / "fig1.png").exists(), name
    # Nothing held: a write makes its folders as before, outside a held folder and in one released.
    write_atomically(tmp_path / "moved" / "a" / "b.txt", lambda stream: stream.write(b"b"))
    write_atomically(tmp_path / "cache" / "c" / "d.txt", lambda stream: stream.write(b"d"))
    assert (tmp_path / "moved" / "a" / "b.txt").read_bytes() == b"b" and (tmp_path / "cache" / "c" / "d.txt").is_file()


def test_a_held_folder_whose_lock_alone_is_deleted_takes_it_again_and_one_replaced_refuses(tmp_path):
    """A lock deleted from a folder still in its place (a tidy-up of dot files) is not a moved folder: the write
    goes on, and the lock is taken again, so a second ampgan is still kept out. One replaced by a folder, a link
    or another process's lock is refused in one line naming it."""
    import fcntl

    from ampgan.errors import UnwritableFile
    from ampgan.files.manifest import lock_holder

    def unlink(lock):
        lock.unlink()

    def linked(lock):
        lock.unlink()
        lock.symlink_to(tmp_path / "elsewhere")

    def taken(lock):
        lock.unlink()
        held = os.open(lock, os.O_RDWR | os.O_CREAT)
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return held

    for name, meddle in {"unlinked": unlink, "folder": lambda lock: unlink(lock) or lock.mkdir()}.items():
        out = tmp_path / name
        with claimed_folder(out, overwrite=False, kind="bench"):
            meddle(out / LOCK)
            if name == "unlinked":
                write_atomically(out / "results.json", lambda stream: stream.write(b"{}"))
                assert (out / "results.json").is_file() and lock_holder(out) == str(os.getpid())  # held again
            else:
                with pytest.raises(UnwritableFile, match=f"{LOCK} was replaced while ampgan wrote here"):
                    write_atomically(out / "results.json", lambda stream: stream.write(b"{}"))
    for name, meddle in {"linked": linked, "taken": taken}.items():
        out = tmp_path / name
        with claimed_folder(out, overwrite=False, kind="bench"):
            held = meddle(out / LOCK)
            with pytest.raises(UnwritableFile, match=f"{LOCK} was replaced while ampgan wrote here"):
                write_atomically(out / "results.json", lambda stream: stream.write(b"{}"))
            assert not (tmp_path / "elsewhere").exists() and not (out / "results.json").exists()
        if held is not None:
            os.close(held)


def test_a_run_folder_moved_mid_run_stops_the_run_and_resumes_where_it_went(tmp_path, capsys, monkeypatch):
    import ampgan.runs.run_folder as run_folder

    run, moved = tmp_path / "run", tmp_path / "kept" / "run"
    real_save = run_folder.save_checkpoint
    (tmp_path / "kept").mkdir()

    def moved_before_step_4(path, payload):
        if payload["step"] == 4:
            run.rename(moved)
        real_save(path, payload)

    monkeypatch.setattr(run_folder, "save_checkpoint", moved_before_step_4)
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "6", "--checkpoint-every", "2", "--out", str(run))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "checkpoints/step-000004.pt" in err and "went with the folder: continue with 'ampgan train --resume'" in err
    assert not run.exists()  # not made again at the old name, half-empty
    monkeypatch.undo()
    assert sorted(p.name for p in (moved / "checkpoints").iterdir()) == ["step-000000.pt", "step-000002.pt"]
    assert run_cli(capsys, "train", "--resume", str(moved), "--quiet")[0] == 0
    assert (moved / "checkpoints" / "step-000006.pt").is_file() and (moved / "config.json").is_file()


def test_a_log_whose_folder_is_gone_or_whose_disk_refuses_is_one_line(tmp_path, monkeypatch):
    """quality.jsonl of a study whose folder was moved mid-race was a FileNotFoundError traceback: opening or
    appending to a log, a refusal by the filesystem is UnwritableFile (one line); anything else stays itself."""
    import errno
    import os

    from ampgan.errors import UnwritableFile
    from ampgan.files import atomic

    with pytest.raises(UnwritableFile, match="No such file or directory.*: put the folder back where it was"):
        atomic.open_for_append(tmp_path / "moved" / "quality.jsonl")
    log = atomic.open_for_append(tmp_path / "metrics.jsonl")
    log.write("kept\n")
    for code in (errno.ENOSPC, errno.EROFS, errno.EFBIG, errno.EBADF):

        def refuse(fd, data):
            raise OSError(code, os.strerror(code))

        with pytest.raises(OSError, match=os.strerror(code)) as refused, monkeypatch.context() as patch:
            patch.setattr(atomic.os, "write", refuse)
            log.write("lost\n")
        assert isinstance(refused.value, UnwritableFile) == (code != errno.EBADF), code
        assert ("ulimit -f" in str(refused.value)) == (code == errno.EFBIG), refused.value
    log.close()
    assert (tmp_path / "metrics.jsonl").read_text() == "kept\n"
    # A real file-size limit (`ulimit -f`; Python ignores SIGXFSZ, so the write fails with EFBIG): it is named.
    code = (
        "import resource, sys\nfrom ampgan.files.atomic import write_atomically\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "try:\n    write_atomically(sys.argv[1], lambda stream: stream.write(bytes(10_000)))\n"
        "except OSError as error:\n    print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, tmp_path / "big.pt"], capture_output=True, text=True, timeout=60)
    assert "(File too large): raise the file-size limit (ulimit -f)" in done.stdout, done.stdout + done.stderr
    assert "every file written before is intact" in done.stdout and not list(tmp_path.glob("*big.pt*"))


def test_a_folder_replaced_then_not_marked_comes_back_whole_in_one_line(tmp_path, capsys, monkeypatch):
    """--overwrite sets the old folder aside, makes the new one and locks it; when marking it then fails (a disk
    full at that moment), the new folder still held the lock file, so putting the old one back failed with a
    raw OSError (ENOTEMPTY) and left it as .out.replaced-PID."""
    import errno

    import ampgan.runs.claim as claim

    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "1", "--out", str(out))
    assert code == 0, err
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))

    def full(path, kind):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(claim, "_write_marker", full)
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "1", "--out", str(out), "--overwrite")
    assert code == 2 and f"cannot create --out {out} (No space left on device)" in err and err.count("\n") == 1, err
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == before  # the old run, whole
    assert [p.name for p in tmp_path.iterdir() if "replaced" in p.name] == []


def test_a_second_ctrl_c_while_an_overwrite_is_undone_waits_for_the_old_run_to_be_back(tmp_path, capsys, monkeypatch):
    """A Ctrl-C after --overwrite moved the old run aside puts it back; a second one while that was done left it
    under .NAME.replaced-PID beside a new folder of bookkeeping alone, and the next command only named it ('ov is
    not an ampgan run folder' to a resume). The second now waits for the old run to be back, then stops."""
    from ampgan.runs.claim import FolderClaim
    from ampgan.speed import planned_run

    run = tmp_path / "ov"
    assert run_cli(capsys, "train", *TINY, "--steps", "2", "--out", str(run))[0] == 0
    first, undo = planned_run.planned, FolderClaim.abandon

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # real signals: the first after the claim, before training
        return first(*args, **kwargs)

    def interrupted_again(claim):
        os.kill(os.getpid(), signal.SIGINT)  # the second, while the first puts the old run back
        return undo(claim)

    monkeypatch.setattr(planned_run, "planned", interrupted)
    monkeypatch.setattr(FolderClaim, "abandon", interrupted_again)
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "4", "--out", str(run), "--overwrite")
    assert (code, err.strip()) == (
        130,
        f"stopped: SIGINT {NOTHING_HALF_WRITTEN}",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ov"]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-000000.pt", "step-000002.pt"]


def test_an_overwrite_stopped_before_its_new_folder_held_anything_puts_the_old_run_back(tmp_path, capsys):
    """Killed while it put the old run back (or between moving it aside and writing anything), an --overwrite
    leaves the old run under .NAME.replaced-PID beside a new folder of ampgan's bookkeeping alone; the next command
    only named it ('not an ampgan run folder' to a resume). That folder goes and the old run comes back."""
    from ampgan.files import manifest
    from ampgan.runs.claim import _write_marker

    run = tmp_path / "ov"
    assert run_cli(capsys, "train", *TINY, "--steps", "2", "--out", str(run))[0] == 0
    gone = subprocess.Popen(["true"])
    gone.wait()
    os.replace(run, tmp_path / f".ov.replaced-{gone.pid}")
    run.mkdir()
    _write_marker(run, "run")
    manifest.start(run)
    (run / LOCK).write_text(str(gone.pid))
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "4", "--quiet")
    assert code == 0 and "the old folder is back in place" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ov"]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "step-000000.pt",
        "step-000002.pt",
        "step-000004.pt",
    ]


def test_a_link_and_a_fifo_are_named_in_the_same_words_wherever_ampgan_meets_one(tmp_path):
    """A link in place of a log said 'ampgan never writes through links in its own folders', one in place of the
    lock 'never opens its own control files through a link (...)'; a FIFO for a checkpoint was 'a FIFO', for any
    other file 'a FIFO (named pipe)'. One sentence for each, said by one helper."""
    from ampgan.files.atomic import open_for_append
    from ampgan.files.jsonfile import not_a_regular_file
    from ampgan.runs.checkpoint import damage
    from ampgan.runs.claim import FolderLock

    (tmp_path / "elsewhere").write_text("")
    for name in ("metrics.jsonl", ".ampgan-lock"):
        (tmp_path / name).symlink_to(tmp_path / "elsewhere")
    said = []
    for opening in (lambda: open_for_append(tmp_path / "metrics.jsonl"), lambda: FolderLock(tmp_path, False)):
        with pytest.raises(AmpganError) as refused:
            opening()
        said.append(str(refused.value))
    assert said == [
        f"{tmp_path / name} is a symbolic link: ampgan never writes through a link in its own folders (it would "
        "write into whatever the link points to); remove the link, or use another folder"
        for name in ("metrics.jsonl", ".ampgan-lock")
    ]
    os.mkfifo(tmp_path / "step-000002.pt")
    assert not_a_regular_file(tmp_path / "step-000002.pt") == "a FIFO (named pipe)"
    assert damage(tmp_path / "step-000002.pt") == "is a FIFO (named pipe), not a checkpoint file"
    assert damage(tmp_path / "metrics.jsonl") == "is a symbolic link, not a checkpoint file"
    assert (tmp_path / "elsewhere").read_text() == ""


def test_a_stop_while_the_first_write_is_being_noted_gives_the_folder_back(tmp_path, monkeypatch):
    """Ctrl-C (or SIGTERM) landing just after a write's temporary file was opened, before the manifest noted it
    (a real signal found it at a new study's first study.json): the temporary file went unproven, the folder was
    kept ("it holds .study.json.writing.tmp, which ampgan did not write") and refused even with --overwrite."""
    import ampgan.files.manifest as manifest

    def stopped(path):
        raise KeyboardInterrupt

    monkeypatch.setattr(manifest, "record_temporary", stopped)
    out = tmp_path / "study"
    with pytest.raises(KeyboardInterrupt):
        with claimed_folder(out, overwrite=False, kind="study"):
            write_atomically(out / "study.json", lambda stream: stream.write(b"{}"))
    assert not out.exists() and os.listdir(tmp_path) == []  # given back whole: nothing left behind


def test_a_temporary_file_of_a_writer_killed_midway_goes_at_the_next_write_there_and_a_live_one_s_stays(tmp_path):
    """kill -9 during a write left its `.NAME....writing.tmp` for good (tens of MB for a dataset cache, in the user's
    dataset folder). Its name says who wrote it: the next write in its folder removes it once its writer is gone (this
    machine's process no more, another machine's untouched for a day), never a live writer's, nor any file not named
    as ampgan names its writers' (an older ampgan's `.NAME.writing.tmp` names none: a name is no proof)."""
    from ampgan.files.atomic import STALE_SECONDS

    killed, alive = writer_in_flight(tmp_path / "cache.npz"), writer_in_flight(tmp_path / "results.json")
    try:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()  # reaped: its pid is free (a zombie's is still taken)
        [dead] = tmp_path.glob(".cache.npz.*.writing.tmp")
        [live] = tmp_path.glob(".results.json.*.writing.tmp")
        assert f".{killed.pid}." in dead.name and dead.read_bytes() == b"half"
        elsewhere = [".a.json.00000000.77.0123abcd.writing.tmp", ".b.json.writing.tmp"]  # another machine's, older
        long_ago = [".f.json.00000000.77.0123abcd.writing.tmp", ".g.json.writing.tmp"]  # the same, untouched a day
        foreign = ["users.writing.tmp", ".c.json.x1.tmp", ".d.json.00000000.77.0123abcd.tmp"]  # not ampgan's names
        for name in elsewhere + long_ago + foreign:
            (tmp_path / name).write_bytes(b"x")
            if name not in elsewhere:
                os.utime(tmp_path / name, (0, time.time() - STALE_SECONDS - 60))
        (tmp_path / ".e.json.writing.tmp").mkdir()  # not a file
        write_atomically(tmp_path / "other.json", lambda stream: stream.write(b"{}"))
        left = {live.name, "other.json", ".e.json.writing.tmp", ".g.json.writing.tmp", *elsewhere, *foreign}
        assert set(os.listdir(tmp_path)) == left
    finally:
        alive.kill()
        alive.wait()
