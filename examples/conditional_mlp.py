"""A conditional GAN of fully connected layers with a least-squares loss, in the layout of the
popular PyTorch-GAN collection's `cgan.py` (label embedding concatenated to the noise; D sees the
flattened image beside the label's embedding), through ampgan's contract.

It shows a conditional model (G(z, labels), a D whose signature the losses choose), a loss other than
BCE (mean squared error, taken in fp32: squared differences of fp16 scores lose their small values), and
`fp32_modules` for a part that must stay in fp32 whatever the precision (here the label embeddings,
which are tiny and sit at the start of both networks).

    ampgan compare --model examples/conditional_mlp.py:cgan
    ampgan compare --model examples/conditional_mlp.py:cgan --set model.hidden=256
"""

import math

import torch
from torch import nn

import ampgan


class Generator(nn.Module):
    def __init__(self, z_dim, num_classes, shape, hidden):
        super().__init__()
        self.shape = shape
        self.label_emb = nn.Embedding(num_classes, num_classes)

        def block(n_in, n_out, normalize=True):
            layers = [nn.Linear(n_in, n_out)]
            if normalize:
                layers.append(nn.BatchNorm1d(n_out, 0.8))
            layers.append(nn.LeakyReLU(0.2, inplace=True))
            return layers

        self.model = nn.Sequential(
            *block(z_dim + num_classes, hidden // 4, normalize=False),
            *block(hidden // 4, hidden // 2),
            *block(hidden // 2, hidden),
            nn.Linear(hidden, math.prod(shape)),
            nn.Tanh(),
        )

    def forward(self, noise, labels):
        return self.model(torch.cat((self.label_emb(labels), noise), -1)).view(-1, *self.shape)


class Discriminator(nn.Module):
    def __init__(self, num_classes, shape, hidden):
        super().__init__()
        self.label_embedding = nn.Embedding(num_classes, num_classes)
        self.model = nn.Sequential(
            nn.Linear(num_classes + math.prod(shape), hidden),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(hidden, hidden),
            nn.Dropout(0.4),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(hidden, 1),
        )

    def forward(self, img, labels):
        return self.model(torch.cat((img.flatten(1), self.label_embedding(labels)), -1)).squeeze(1)


# ---- the glue ---------------------------------------------------------------------------------------
def cgan(data: ampgan.DataSpec, *, z_dim: int = 96, hidden: int = 512) -> ampgan.GAN:
    shape = (data.channels, data.image_size, data.image_size)
    generator = Generator(z_dim, data.num_classes, shape, hidden)
    discriminator = Discriminator(data.num_classes, shape, hidden)

    def least_squares(scores, target):
        return ((scores.float() - target) ** 2).mean()

    def d_loss(ctx):
        return 0.5 * (
            least_squares(ctx.D(ctx.real, ctx.labels), 1.0) + least_squares(ctx.D(ctx.fake, ctx.fake_labels), 0.0)
        )

    def g_loss(ctx):
        return least_squares(ctx.D(ctx.fake, ctx.fake_labels), 1.0)

    return ampgan.GAN(
        generator=generator,
        discriminator=discriminator,
        z_dim=z_dim,
        conditional=True,
        num_classes=data.num_classes,
        d_loss=d_loss,
        g_loss=g_loss,
        fp32_modules=(generator.label_emb, discriminator.label_embedding),
        optimizer_g=ampgan.Adam(lr=2e-4, betas=(0.5, 0.999)),
        description=f"conditional MLP GAN, {hidden}",
    )
