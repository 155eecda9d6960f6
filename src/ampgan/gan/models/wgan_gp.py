"""`wgan-gp`: a Wasserstein GAN with gradient penalty (Gulrajani et al. 2017): DCGAN layers, a critic
without batch norm, `d_steps` critic updates per G update, penalty weight 10, Adam 1e-4, betas (0, 0.9).

Its precision risk is the penalty: the critic's gradient with respect to its input, taken inside the
loss and backpropagated again (double backward). Under fp16 loss scaling it must start from the scaled
score and be unscaled before it is squared, or it either underflows to zero or enters the loss
multiplied by the scale; `LossContext.input_gradients` does both, in fp32.
"""

from __future__ import annotations

import torch

from ampgan.gan.contract import GAN, Adam, DataSpec, built_in
from ampgan.gan.models.acgan import BASE_SIZE, Generator
from ampgan.gan.models.dcgan import Discriminator
from ampgan.gan.options import require_image_size, require_non_negative, require_whole


def gradient_penalty(context, real: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
    """E[(||d critic(x) / dx|| - 1)^2] at x between each real image and a fake one, in fp32."""
    mix = torch.rand(real.shape[0], 1, 1, 1, device=real.device, generator=context.rng)
    between = (mix * real.float() + (1 - mix) * fake.float()).requires_grad_(True)
    gradients = context.input_gradients(context.D(between), between)  # fp32, unscaled
    norms = gradients.flatten(1).pow(2).sum(1).add(1e-12).sqrt()  # the epsilon is safe in fp32
    return (norms - 1).pow(2).mean()


@built_in("wgan-gp")
def wgan_gp(
    data: DataSpec, *, width: int = 32, z_dim: int = 128, critic_steps: int = 5, penalty_weight: float = 10.0
) -> GAN:
    """WGAN-GP: width w, noise size z_dim, `critic_steps` critic updates per G update."""
    require_image_size("wgan-gp", data, tuple(BASE_SIZE))
    require_whole(width=width, z_dim=z_dim, critic_steps=critic_steps)
    require_non_negative(penalty_weight=penalty_weight)

    def critic_loss(context):
        """Score the fakes low and the real images high; keep the critic 1-Lipschitz between them."""
        real_score, fake_score = context.D(context.real).float(), context.D(context.fake).float()
        distance = real_score.mean() - fake_score.mean()
        penalty = gradient_penalty(context, context.real, context.fake)
        return -distance + penalty_weight * penalty, {
            "wasserstein": distance.detach(),
            "gradient_penalty": penalty.detach(),
        }

    def g_loss(context):
        return -context.D(context.fake).float().mean()

    return GAN(
        generator=Generator(data, z_dim, width, conditional=False),
        discriminator=Discriminator(data, width, batch_norm=False),
        z_dim=z_dim,
        d_loss=critic_loss,
        g_loss=g_loss,
        d_steps=critic_steps,
        optimizer_g=Adam(lr=1e-4, betas=(0.0, 0.9)),
        optimizer_d=Adam(lr=1e-4, betas=(0.0, 0.9)),
        description=f"WGAN-GP, unconditional, width {width}, z {z_dim}, {critic_steps} critic steps, "
        f"penalty {penalty_weight:g}",
    )
