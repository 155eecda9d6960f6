"""pytorch/examples' DCGAN (dcgan/main.py: 64 px, nz 100, ngf = ndf = 64), through ampgan's contract.

The two networks are as that script writes them; the glue below is what a user adds:
  - G takes (B, nz, 1, 1) noise: an Unflatten in front lets ampgan hand it (B, nz);
  - D ends in a Sigmoid and the script trains it with nn.BCELoss. BCE on probabilities is the loss
    autocast refuses (and in fp16 the sigmoid saturates to exactly 0 or 1, so log() returns -inf):
    the Sigmoid is dropped and the same loss is taken on logits, in fp32 (ampgan.real_fake_loss).

    ampgan compare --model examples/pytorch_dcgan.py:dcgan --image-size 64
    ampgan compare --model examples/pytorch_dcgan.py:dcgan --image-size 64 --set model.ngf=32 --set model.ndf=32
"""

from torch import nn

import ampgan


class Generator(nn.Module):  # as in pytorch/examples
    def __init__(self, nz, ngf, nc):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 8),
            nn.ReLU(True),  # 4x4
            nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),  # 8x8
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),  # 16
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),  # 32x32
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
            nn.Tanh(),
        )  # 64x64

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):  # as in pytorch/examples
    def __init__(self, ndf, nc):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),  # 32x32
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 4),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )  # (B, 1, 1, 1)

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


def weights_init(m):  # as in pytorch/examples
    if m.__class__.__name__.find("Conv") != -1:
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif m.__class__.__name__.find("BatchNorm") != -1:
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


# ---- the glue ---------------------------------------------------------------------------------------
def dcgan(data: ampgan.DataSpec, *, nz: int = 100, ngf: int = 64, ndf: int = 64) -> ampgan.GAN:
    if data.image_size != 64:
        raise ValueError(
            f"this DCGAN is written for 64 px images, the data is {data.image_size} px: add --image-size 64"
        )
    generator = nn.Sequential(nn.Unflatten(1, (nz, 1, 1)), Generator(nz, ngf, data.channels))
    discriminator = Discriminator(ndf, data.channels)
    discriminator.main = discriminator.main[:-1]  # logits: the loss below applies the sigmoid, in fp32
    generator.apply(weights_init)
    discriminator.apply(weights_init)

    def d_real(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.real), 1.0)  # nn.BCELoss()(D(real), 1), on logits

    def d_fake(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.fake), 0.0)  # ctx.fake is detached in D's update

    def g_loss(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.fake), 1.0)  # D is frozen while G learns

    return ampgan.GAN(
        generator=generator,
        discriminator=discriminator,
        z_dim=nz,
        d_loss=(d_real, d_fake),
        g_loss=g_loss,
        description=f"pytorch/examples DCGAN, ngf {ngf}, ndf {ndf}",
    )
