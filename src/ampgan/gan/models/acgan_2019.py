"""`acgan-2019`: the study's own AC-GAN, as its TensorFlow 1 code trains it (Tpu/GanV3v3/gan.py).

    G: [z (100, U(-1, 1)), one-hot label] -> FC 1024 -> BN -> ReLU -> FC 128 x s x s -> BN -> ReLU
       -> deconv 4x4/2 to 64 -> BN -> ReLU -> deconv 4x4/2 to C -> sigmoid        (s = 7 at 28 px, 8 at 32)
    D: conv 4x4/2 64 -> lReLU -> conv 4x4/2 128 -> BN -> lReLU -> FC 1024 -> BN -> lReLU -> FC 1
       classifier on D's 1024 features: FC 128 -> BN -> lReLU -> FC K

Half of its arithmetic is the two (128 s^2 x 1024) fully-connected layers: matrix products, where
tensor cores and AMX gain most; ampgan's `acgan` does almost all of its work in small convolutions.

Losses as the study's: sigmoid cross-entropy for real/fake (D: real -> 1, fake -> 0; G: fake -> 1),
and a class ("information") loss on real *and* fake images stepped by a third Adam over D, its
classifier and G. Each fake is drawn for the label of the real image beside it, as the study fed
the batch's own labels to G. Adam lr 2e-4, beta1 0.5 for all three.

Kept from the study: the sigmoid output, so images are in [0, 1] (the data range follows the model:
ampgan scales the data to [0, 1] for it), computed in fp32 as the study cast to fp32 before it;
FC layers with Xavier-uniform weights (tf.contrib.layers.fully_connected's default), convolutions with
N(0, 0.02) (truncated for D's, as TF's conv2d), zero biases; batch norm with momentum 0.1 (TF decay 0.9),
eps 1e-5. Different: TF ran the G and classifier updates from one forward pass and applied both; here
the classifier update runs after G's, on a fresh forward pass of the updated G (the seam's order). The
study used a static loss scale of 128 for every network in fp16: `--precision fp16 --loss-scale 128`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ampgan.gan.contract import GAN, Adam, DataSpec, Update, built_in
from ampgan.gan.layers import class_loss, real_fake_loss, unused_but_reduced
from ampgan.gan.options import require_image_size, require_whole

SIZES = (28, 32)
STUDY_ADAM = Adam(lr=2e-4, betas=(0.5, 0.999))


def _init_like_the_study(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.xavier_uniform_(module.weight)
        nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Conv2d):
        nn.init.trunc_normal_(module.weight, std=0.02, a=-0.04, b=0.04)
        nn.init.zeros_(module.bias)
    elif isinstance(module, nn.ConvTranspose2d):
        nn.init.normal_(module.weight, 0.0, 0.02)
        nn.init.zeros_(module.bias)


class StudyGenerator(nn.Module):
    def __init__(self, data: DataSpec, z_dim: int):
        super().__init__()
        self.num_classes = data.num_classes
        self.side = data.image_size // 4
        self.dense = nn.Sequential(
            nn.Linear(z_dim + data.num_classes, 1024),
            nn.BatchNorm1d(1024),
            nn.ReLU(),
            nn.Linear(1024, 128 * self.side**2),
            nn.BatchNorm1d(128 * self.side**2),
            nn.ReLU(),
        )
        self.upsample = nn.Sequential(
            nn.ConvTranspose2d(128, 64, 4, stride=2, padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.ConvTranspose2d(64, data.channels, 4, stride=2, padding=1),
        )
        self.apply(_init_like_the_study)

    def forward(self, z: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        code = F.one_hot(labels, self.num_classes).to(z.dtype)
        x = self.dense(torch.cat([z, code], dim=1)).view(-1, 128, self.side, self.side)  # (B, 128, s, s)
        return torch.sigmoid(self.upsample(x).float())  # (B, C, 4s, 4s) in [0, 1], sigmoid in fp32


class StudyDiscriminator(nn.Module):
    """image -> (real/fake logit (B,), class logits (B, K))."""

    def __init__(self, data: DataSpec):
        super().__init__()
        side = data.image_size // 4
        self.trunk = nn.Sequential(
            nn.Conv2d(data.channels, 64, 4, stride=2, padding=1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(64, 128, 4, stride=2, padding=1),
            nn.BatchNorm2d(128),
            nn.LeakyReLU(0.2),
            nn.Flatten(),
            nn.Linear(128 * side**2, 1024),
            nn.BatchNorm1d(1024),
            nn.LeakyReLU(0.2),  # (B, 1024)
        )
        self.real_fake = nn.Linear(1024, 1)
        self.classifier = nn.Sequential(
            nn.Linear(1024, 128), nn.BatchNorm1d(128), nn.LeakyReLU(0.2), nn.Linear(128, data.num_classes)
        )
        self.apply(_init_like_the_study)

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.trunk(images)
        return self.real_fake(features).squeeze(1), self.classifier(features)


@built_in("acgan-2019")
def acgan_2019(data: DataSpec, *, z_dim: int = 100) -> GAN:
    """The study's network and losses (z_dim 100 as the study; not a multiple of 8)."""
    require_image_size("acgan-2019", data, SIZES)
    require_whole(z_dim=z_dim)

    def draw_inputs(context):
        z = torch.rand(context.batch_size, z_dim, device=context.device, generator=context.rng).mul_(2).sub_(1)
        return z, context.labels  # the study conditions each fake on the real batch's labels

    def d_real(context):
        real_fake, classes = context.D(context.real)
        return real_fake_loss(real_fake, 1.0) + unused_but_reduced(classes), {
            "d_real_acc": (real_fake > 0).float().mean()
        }

    def d_fake(context):
        real_fake, classes = context.D(context.fake)
        return real_fake_loss(real_fake, 0.0) + unused_but_reduced(classes), {
            "d_fake_acc": (real_fake < 0).float().mean()
        }

    def g_loss(context):
        real_fake, _ = context.D(context.fake)
        return real_fake_loss(real_fake, 1.0)

    def class_on_real(context):
        real_fake, classes = context.D(context.real)
        return class_loss(classes, context.labels) + unused_but_reduced(real_fake), {
            "class_acc_real": (classes.argmax(1) == context.labels).float().mean()
        }

    def class_on_fake(context):
        real_fake, classes = context.D(context.generate(context.z, context.fake_labels))
        return class_loss(classes, context.fake_labels) + unused_but_reduced(real_fake), {
            "class_acc_fake": (classes.argmax(1) == context.fake_labels).float().mean()
        }

    return GAN(
        generator=StudyGenerator(data, z_dim),
        discriminator=StudyDiscriminator(data),
        z_dim=z_dim,
        conditional=True,
        num_classes=data.num_classes,
        z_distribution="uniform",
        image_range=(0.0, 1.0),
        d_loss=(d_real, d_fake),
        g_loss=g_loss,
        extra_updates=(
            Update(
                "classifier",
                loss=(class_on_real, class_on_fake),
                networks=("generator", "discriminator"),
                optimizer=STUDY_ADAM,
            ),
        ),
        optimizer_g=STUDY_ADAM,
        optimizer_d=STUDY_ADAM,
        draw_inputs=draw_inputs,
        description=f"the study's AC-GAN (TF1, 2019): FC 1024 + two deconvolutions, z {z_dim}, sigmoid output",
    )
