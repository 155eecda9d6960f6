"""ampgan's training step against the same GAN written for PyTorch Lightning, and against the plain loop.

    pip install lightning   # a benchmark dependency only: ampgan does not import it
    python benchmarks/lightning_peer.py --batch-sizes 64,256 --precisions fp32,bf16 --rounds 12 --out DIR

The three compute one AC-GAN (benchmarks/reference_loop.py's networks, layer for layer ampgan's
`acgan` with spectral norm off; the same losses and Adam settings) on one resident batch of digits:

- Lightning: a LightningModule as its manual-optimization guide writes a GAN: `automatic_optimization =
  False`, `self.optimizers()`, `toggle_optimizer` / `untoggle_optimizer` around each update,
  `manual_backward`, run by `Trainer(precision="32-true" | "bf16-mixed" | "16-mixed")` on one device, with
  logging, checkpoints, the progress bar and the model summary off (the fastest a user would set it up);
- ampgan: `train_step`, as `ampgan train` runs it (NCHW, eager: the same footing);
- plain: reference_loop.py, written the way pytorch/examples' dcgan/main.py is.

They alternate inside one `Trainer.fit`: each Lightning step is timed by a callback from
on_train_batch_start to on_train_batch_end (the Trainer's own work for a batch, without the loader),
and after it, in an order shuffled per round, one ampgan step and one plain step, each clocked alone.
A round's ratios cancel the machine's slow drifts; the speedups carry 95% intervals (speed/intervals.py,
the between-run spread included). >1: ampgan is faster.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_reference import clock  # noqa: E402
from reference_loop import NetD, NetG, ReferenceLoop, weights_init  # noqa: E402

from ampgan.bench.stats import timing_stats  # noqa: E402
from ampgan.config import config_from_options  # noqa: E402
from ampgan.data import DataConfig, load_dataset  # noqa: E402
from ampgan.data.batches import BatchStream  # noqa: E402
from ampgan.precisions import BF16, FP16, FP32
from ampgan.speed.intervals import speedup_interval  # noqa: E402
from ampgan.system.cpu_tuning import keep_freed_memory_for_reuse  # noqa: E402
from ampgan.system.environment import environment_stamp  # noqa: E402
from ampgan.training.prepared import prepare_run  # noqa: E402
from ampgan.training.state import build_train_state, wrap_modules  # noqa: E402
from ampgan.training.step import train_step  # noqa: E402

LIGHTNING_PRECISION = {FP32: "32-true", BF16: "bf16-mixed", FP16: "16-mixed"}


def lightning_gan(nc: int, n_classes: int, nz: int = 128, width: int = 64):
    import lightning as L  # noqa: N812 - Lightning's own spelling

    class LitACGAN(L.LightningModule):
        """The GAN as Lightning's manual-optimization docs write one."""

        def __init__(self):
            super().__init__()
            self.automatic_optimization = False
            torch.manual_seed(0)
            self.netG, self.netD = NetG(nz, width, nc, n_classes), NetD(width, nc, n_classes)
            self.netG.apply(weights_init)
            self.netD.apply(weights_init)
            self.criterion, self.aux_criterion = torch.nn.BCEWithLogitsLoss(), torch.nn.CrossEntropyLoss()

        def training_step(self, batch, batch_idx):
            real, labels = batch
            opt_d, opt_g = self.optimizers()
            b = real.size(0)
            ones, zeros = torch.ones(b, device=self.device), torch.zeros(b, device=self.device)
            noise = torch.randn(b, nz, device=self.device)
            fake_labels = torch.randint(0, n_classes, (b,), device=self.device)

            # G's forward before the toggles (toggle_optimizer(opt_d) would freeze G's weights, and the
            # Lightning GAN tutorial's answer is a second G forward per step): one forward, as the others do.
            fake = self.netG(noise, fake_labels)
            self.toggle_optimizer(opt_d)  # (1) update D
            output, aux = self.netD(real)
            err_real = self.criterion(output.float(), ones) + self.aux_criterion(aux.float(), labels)
            output, aux = self.netD(fake.detach())
            err_fake = self.criterion(output.float(), zeros) + self.aux_criterion(aux.float(), fake_labels)
            opt_d.zero_grad()
            self.manual_backward(err_real + err_fake)
            opt_d.step()
            self.untoggle_optimizer(opt_d)

            self.toggle_optimizer(opt_g)  # (2) update G
            output, aux = self.netD(fake)
            err_g = self.criterion(output.float(), ones) + self.aux_criterion(aux.float(), fake_labels)
            opt_g.zero_grad()
            self.manual_backward(err_g)
            opt_g.step()
            self.untoggle_optimizer(opt_g)

        def configure_optimizers(self):
            return (
                torch.optim.Adam(self.netD.parameters(), lr=2e-4, betas=(0.5, 0.999)),
                torch.optim.Adam(self.netG.parameters(), lr=2e-4, betas=(0.5, 0.999)),
            )

    return LitACGAN()


def measure(precision: str, batch_size: int, rounds: int, warmup: int, device, dataset) -> dict:
    import lightning as L  # noqa: N812

    config = config_from_options(
        precision=precision,
        batch_size=batch_size,
        device=device.type,
        channels_last=False,
        compile=False,
        sets=["model.spectral_norm_d=false"],
    )
    prepared = prepare_run(config, dataset, device)
    state = build_train_state(prepared.config, prepared.model, prepared.data, prepared.policy)
    wrap_modules(state, compile=False, data_parallel=False)
    reference = ReferenceLoop(precision, device=device.type, nc=dataset.channels)
    real, labels = BatchStream(dataset, batch_size, device, 0).next_batch()
    module = lightning_gan(dataset.channels, len(dataset.class_names))
    times = {"lightning": [], "ampgan": [], "plain": []}
    order = random.Random(0)

    class Interleave(L.Callback):
        def __init__(self):
            self.started, self.seen = 0.0, 0

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if device.type == "cuda":
                torch.cuda.synchronize()
            self.started = time.perf_counter()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if device.type == "cuda":
                torch.cuda.synchronize()
            lightning_s = time.perf_counter() - self.started
            others = [
                ("ampgan", lambda: train_step(state, lambda: (real, labels))),
                ("plain", lambda: reference.step(real, labels)),
            ]
            order.shuffle(others)
            measured = {name: clock(device, run) for name, run in others}
            self.seen += 1
            if self.seen > warmup:
                times["lightning"].append(lightning_s)
                for name, seconds in measured.items():
                    times[name].append(seconds)

    batches = [(real, labels)] * (warmup + rounds)
    loader = torch.utils.data.DataLoader(batches, batch_size=None)
    trainer = L.Trainer(
        accelerator="cuda" if device.type == "cuda" else "cpu",
        devices=1,
        precision=LIGHTNING_PRECISION[precision],
        max_epochs=1,  # one pass over the batches
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[Interleave()],
    )
    trainer.fit(module, loader)
    over_lightning = speedup_interval(times["lightning"], times["ampgan"])
    over_plain = speedup_interval(times["plain"], times["ampgan"])
    row = {
        "batch_size": batch_size,
        "precision": precision,
        "rounds": len(times["ampgan"]),
        **{f"{name}_median_ms": timing_stats(samples).median_s * 1e3 for name, samples in times.items()},
        "ampgan_over_lightning": over_lightning.to_dict(),
        "ampgan_over_plain": over_plain.to_dict(),
        "samples_s": times,
    }
    print(
        f"batch {batch_size:>5} {precision}: ampgan {row['ampgan_median_ms']:.1f} ms, Lightning "
        f"{row['lightning_median_ms']:.1f} ms, plain {row['plain_median_ms']:.1f} ms; ampgan over Lightning "
        f"{over_lightning.describe()}, over plain {over_plain.describe()}",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-sizes", default="64,256")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=None, help="write lightning_peer.json here")
    args = parser.parse_args()
    try:
        import lightning
    except ImportError:
        sys.exit("error: this benchmark needs Lightning (pip install lightning); ampgan itself does not")
    device = torch.device(args.device)
    if device.type == "cpu":
        keep_freed_memory_for_reuse()  # process-wide: all three loops get it alike
    dataset = load_dataset(DataConfig(dataset="digits"))
    report = {"environment": environment_stamp(device), "lightning": lightning.__version__, "rows": []}
    for batch_size in map(int, args.batch_sizes.split(",")):
        for precision in args.precisions.split(","):
            report["rows"].append(measure(precision, batch_size, args.rounds, args.warmup, device, dataset))
    print(f"{report['environment']['hardware_summary']} | torch {torch.__version__}, lightning {lightning.__version__}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "lightning_peer.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
