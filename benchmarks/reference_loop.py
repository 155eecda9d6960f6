"""A plain PyTorch AC-GAN loop, written the way pytorch/examples' dcgan/main.py is written.

This is the yardstick for ampgan's own training step: the same networks (layer for layer, the
same parameter count), the same losses and Adam settings, a resident batch, and nothing clever:
default Adam, separate backward passes for the real and fake halves as dcgan/main.py does, the
logging `.item()` calls every step, autocast wrapped around the forward passes for bf16/fp16.
`compare_reference.py` times it against ampgan's `train_step` in one interleaved run.
"""

from __future__ import annotations

import torch
from torch import nn


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1 or classname.find("Linear") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


class NetG(nn.Module):
    def __init__(self, nz=128, ngf=64, nc=1, n_classes=10):
        super().__init__()
        self.nz, self.ngf = nz, ngf
        self.emb = nn.Embedding(n_classes, nz)
        self.fc = nn.Sequential(
            nn.Linear(2 * nz, ngf * 4 * 4 * 4, bias=False), nn.BatchNorm1d(ngf * 4 * 4 * 4), nn.ReLU(True)
        )
        self.main = nn.Sequential(
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1),
            nn.Tanh(),
        )

    def forward(self, z, y):
        x = self.fc(torch.cat([z, self.emb(y)], 1)).view(-1, self.ngf * 4, 4, 4)
        return self.main(x)


class NetD(nn.Module):
    def __init__(self, ndf=64, nc=1, n_classes=10):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 4),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Flatten(),
        )
        self.adv = nn.Linear(ndf * 4 * 4 * 4, 1)
        self.aux = nn.Linear(ndf * 4 * 4 * 4, n_classes)

    def forward(self, x):
        h = self.main(x)
        return self.adv(h).view(-1), self.aux(h)


class ReferenceLoop:
    """One object per precision so the comparison can interleave it with ampgan's step."""

    def __init__(self, precision="fp32", nz=128, width=64, nc=1, n_classes=10, device="cpu", seed=0):
        torch.manual_seed(seed)
        self.device, self.nz, self.n_classes = torch.device(device), nz, n_classes
        self.netG = NetG(nz, width, nc, n_classes).to(self.device)
        self.netD = NetD(width, nc, n_classes).to(self.device)
        self.netG.apply(weights_init)
        self.netD.apply(weights_init)
        self.optimizerD = torch.optim.Adam(self.netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.optimizerG = torch.optim.Adam(self.netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.criterion = nn.BCEWithLogitsLoss()
        self.aux_criterion = nn.CrossEntropyLoss()
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=precision == "fp16")
        self.log = []

    def autocast(self):
        return torch.autocast(self.device.type, dtype=self.dtype or torch.float32, enabled=self.dtype is not None)

    def step(self, real_cpu, labels):
        b_size = real_cpu.size(0)
        label = torch.full((b_size,), 1.0, device=self.device)

        # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
        self.netD.zero_grad()
        with self.autocast():
            output, aux = self.netD(real_cpu)
            errD_real = self.criterion(output.float(), label) + self.aux_criterion(aux.float(), labels)
        self.scaler.scale(errD_real).backward()
        D_x = torch.sigmoid(output.float()).mean().item()

        noise = torch.randn(b_size, self.nz, device=self.device)
        fake_labels = torch.randint(0, self.n_classes, (b_size,), device=self.device)
        with self.autocast():
            fake = self.netG(noise, fake_labels)
            label.fill_(0.0)
            output, aux = self.netD(fake.detach())
            errD_fake = self.criterion(output.float(), label) + self.aux_criterion(aux.float(), fake_labels)
        self.scaler.scale(errD_fake).backward()
        D_G_z1 = torch.sigmoid(output.float()).mean().item()
        errD = errD_real + errD_fake
        self.scaler.step(self.optimizerD)

        # (2) Update G network: maximize log(D(G(z)))
        self.netG.zero_grad()
        label.fill_(1.0)
        with self.autocast():
            output, aux = self.netD(fake)
            errG = self.criterion(output.float(), label) + self.aux_criterion(aux.float(), fake_labels)
        self.scaler.scale(errG).backward()
        D_G_z2 = torch.sigmoid(output.float()).mean().item()
        self.scaler.step(self.optimizerG)
        self.scaler.update()
        self.log.append((errD.item(), errG.item(), D_x, D_G_z1, D_G_z2))
