"""A WGAN-GP for 28 px greyscale images in the layout of the widely copied PyTorch ports of Gulrajani
et al.'s code (a linear layer to 4x4, three 5x5 transposed convolutions, a sigmoid; a 5x5 strided
convolutional critic without batch norm), through ampgan's contract.

What the glue changes is the gradient penalty. The ports compute it with
    torch.autograd.grad(critic(x_hat), x_hat, grad_outputs=torch.ones(...), create_graph=True)
which is right in fp32 and wrong under fp16 loss scaling: the backward pass must start from the
*scaled* score (or small gradients flush to zero in fp16) and the result must be unscaled before it is
squared. `ctx.input_gradients` does both, in fp32, for every precision.

    ampgan compare --model examples/wgan_gp.py:wgan_gp
    ampgan compare --model examples/wgan_gp.py:wgan_gp --set model.dim=32 --set model.critic_iters=3
"""

import torch
from torch import nn

import ampgan


class Generator(nn.Module):
    def __init__(self, dim: int, z_dim: int):
        super().__init__()
        self.dim = dim
        self.preprocess = nn.Sequential(nn.Linear(z_dim, 4 * 4 * 4 * dim), nn.ReLU(True))
        self.block1 = nn.Sequential(nn.ConvTranspose2d(4 * dim, 2 * dim, 5), nn.ReLU(True))  # 4 -> 8 (cropped to 7)
        self.block2 = nn.Sequential(nn.ConvTranspose2d(2 * dim, dim, 5), nn.ReLU(True))  # 7 -> 11 ...
        self.deconv_out = nn.ConvTranspose2d(dim, 1, 8, stride=2)  # ... -> 28
        self.sigmoid = nn.Sigmoid()

    def forward(self, z):
        x = self.preprocess(z).view(-1, 4 * self.dim, 4, 4)
        x = self.block1(x)[:, :, :7, :7]
        x = self.block2(x)
        return self.sigmoid(self.deconv_out(x))  # (B, 1, 28, 28) in [0, 1]


class Critic(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(1, dim, 5, stride=2, padding=2),
            nn.ReLU(True),  # 14
            nn.Conv2d(dim, 2 * dim, 5, stride=2, padding=2),
            nn.ReLU(True),  # 7
            nn.Conv2d(2 * dim, 4 * dim, 5, stride=2, padding=2),
            nn.ReLU(True),
        )  # 4
        self.output = nn.Linear(4 * 4 * 4 * dim, 1)

    def forward(self, images):
        return self.output(self.main(images).flatten(1)).squeeze(1)


# ---- the glue ---------------------------------------------------------------------------------------
def wgan_gp(
    data: ampgan.DataSpec, *, dim: int = 64, z_dim: int = 128, critic_iters: int = 5, lambda_gp: float = 10.0
) -> ampgan.GAN:
    if (data.image_size, data.channels) != (28, 1):
        raise ValueError(
            f"this WGAN-GP draws 28 px greyscale images, the data is {data.image_size} px with "
            f"{data.channels} channels: use --image-size 28 --channels 1"
        )

    def critic_loss(ctx):
        real, fake = ctx.real, ctx.fake
        alpha = torch.rand(real.shape[0], 1, 1, 1, device=real.device, generator=ctx.rng)
        x_hat = (alpha * real.float() + (1 - alpha) * fake.float()).requires_grad_(True)
        gradients = ctx.input_gradients(ctx.D(x_hat), x_hat)  # fp32, right under every loss scale
        penalty = ((gradients.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
        wasserstein = ctx.D(real).float().mean() - ctx.D(fake).float().mean()
        return -wasserstein + lambda_gp * penalty, {"wasserstein": wasserstein.detach()}

    def g_loss(ctx):
        return -ctx.D(ctx.fake).float().mean()

    adam = ampgan.Adam(lr=1e-4, betas=(0.5, 0.9))  # the ports' settings
    return ampgan.GAN(
        generator=Generator(dim, z_dim),
        discriminator=Critic(dim),
        z_dim=z_dim,
        d_loss=critic_loss,
        g_loss=g_loss,
        d_steps=critic_iters,
        image_range=(0.0, 1.0),
        optimizer_g=adam,
        optimizer_d=adam,
        description=f"WGAN-GP port, dim {dim}",
    )
