"""One training step: (1) update D, (2) update G, in whatever precision the policy says.

Two changes to the original AC-GAN losses, each found by measurement on the embedded digits
(benchmarks/gan_trials.py; numbers in the README, "Making the AC-GAN learn"):
- D's class head learns from real images only. Trained on fakes with their intended labels too, D
  and G can agree on any consistent class mapping: rows drew the wrong digit (evaluator accuracy
  0.20-0.43 instead of 0.97 at the same budget).
- G's loss has a mode-seeking term (Mao et al. 2019, "Mode Seeking GANs"): the batch is drawn in
  pairs with one class and two noise vectors, and G is rewarded for images that differ as much as
  their noise does. Without it each class collapses to one image whatever the noise (diversity
  12-25% of the real images' at the budgets tried, with or without the class loss, a minibatch
  standard-deviation feature, label smoothing or a lower class-loss weight).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ampgan.training.state import TrainState


def _real_fake_loss(logits: torch.Tensor, target: float) -> torch.Tensor:
    """`target`: 1 for "real" (0.9 with one-sided smoothing), 0 for "fake".
    .float(): the sigmoid/log-sum-exp of the losses run in FP32 whatever the compute dtype."""
    logits = logits.float()
    return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, target))


def _class_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float(), labels)


def _mode_seeking_penalty(fake: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """1 / (image distance / noise distance) over the pairs (i, i + B/2), which share a class: small
    when G turns different noise into different images. FP32 whatever the compute dtype."""
    half = fake.shape[0] // 2
    images = fake.float()
    image_distance = (images[:half] - images[half:2 * half]).abs().mean()
    noise_distance = (z[:half] - z[half:2 * half]).abs().mean()
    return 1.0 / (image_distance / noise_distance + 1e-5)


def _set_requires_grad(module: torch.nn.Module, flag: bool) -> None:
    for parameter in module.parameters():
        parameter.requires_grad_(flag)


def train_step(state: TrainState, real: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
    """One D update then one G update on B real and B generated images.

    Returns 0-dim tensors (never Python numbers): reading them would make the host wait for the
    device, so the loop reads them only when it logs.
    """
    G, D, policy, losses = state.run_generator, state.run_discriminator, state.policy, state.losses
    shape = state.generator.shape
    batch = real.shape[0]
    z = torch.randn(batch, shape.z_dim, device=real.device, generator=state.rng)
    fake_labels = torch.randint(shape.num_classes, (batch,), device=real.device, generator=state.rng)
    if losses.mode_seeking:
        half = batch // 2  # pairs (i, i + half) share a class and differ in their noise
        fake_labels = torch.cat([fake_labels[:half], fake_labels[:batch - half]])

    # (1) Update D: real -> 1, fake -> 0, and the class of real images. The real and the fake half each get
    # their own backward pass, as in dcgan/main.py: the real half's graph is freed before the fake
    # half is built, and under DDP each pass is one complete forward/backward of the wrapped D.
    state.optimizer_d.zero_grad(set_to_none=True)
    with policy.autocast():
        fake = G(z, fake_labels)  # (B, C, H, W)
        real_fake_real, class_real = D(real)
        loss_d_real = _real_fake_loss(real_fake_real, losses.real_label) + _class_loss(class_real, labels)
    state.scaler_d.backward(loss_d_real)
    with policy.autocast():
        real_fake_fake, class_fake = D(fake.detach())
        loss_d_fake = _real_fake_loss(real_fake_fake, 0.0)
        if losses.class_loss_on_fakes:
            loss_d_fake = loss_d_fake + _class_loss(class_fake, fake_labels)
        else:
            # The class head takes no part in this pass, but DDP expects every parameter of the
            # wrapped D to receive a gradient in each backward: a zero-weighted term gives it one
            # (an exact zero, so the update is unchanged) without find_unused_parameters.
            loss_d_fake = loss_d_fake + 0.0 * class_fake.float().sum()
    state.scaler_d.backward(loss_d_fake)
    skipped_d = state.scaler_d.step(state.optimizer_d)

    # (2) Update G: make D call the fakes real, and of the class they were drawn for.
    # D's weights are frozen for this pass: G's backward needs D's input gradients only, and
    # skipping D's weight gradients (discarded anyway) saves about a third of D's backward work.
    # D runs unwrapped here (never DDP): no D gradient is reduced in G's update.
    _set_requires_grad(state.discriminator, False)
    try:
        with policy.autocast():
            real_fake_g, class_g = state.run_discriminator_for_g(fake)
            loss_g = _real_fake_loss(real_fake_g, 1.0) + losses.class_weight_g * _class_loss(class_g, fake_labels)
            if losses.mode_seeking:
                loss_g = loss_g + losses.mode_seeking * _mode_seeking_penalty(fake, z)
        state.optimizer_g.zero_grad(set_to_none=True)
        skipped_g = state.scaler_g.backward_and_step(loss_g, state.optimizer_g)
    finally:
        _set_requires_grad(state.discriminator, True)

    state.step += 1
    with torch.no_grad():
        return {
            "loss_d": (loss_d_real + loss_d_fake).detach(),
            "loss_g": loss_g.detach(),
            # D's accuracy: real/fake head on each half, class head on real and on fake images.
            "d_real_acc": (real_fake_real > 0).float().mean(),
            "d_fake_acc": (real_fake_fake < 0).float().mean(),
            "class_acc_real": (class_real.argmax(1) == labels).float().mean(),
            "class_acc_fake": (class_fake.argmax(1) == fake_labels).float().mean(),
            "skipped_d": skipped_d,
            "skipped_g": skipped_g,
        }
