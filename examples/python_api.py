"""The study from Python: a model function defined here, its verdict as data.

    python examples/python_api.py runs/api-example

`ampgan.compare` writes the folder `ampgan compare` writes (compare.json, report.html, runs/...). This
model is recorded as `examples/python_api.py:tiny_dcgan`, so the command line can train it again.
"""

import sys

from torch import nn

import ampgan


def tiny_dcgan(data: ampgan.DataSpec, *, width: int = 16, z_dim: int = 64) -> ampgan.GAN:
    if data.image_size != 28:
        raise ValueError("tiny_dcgan draws 28 px images: use --image-size 28")
    generator = nn.Sequential(
        nn.Linear(z_dim, 2 * width * 7 * 7),
        nn.BatchNorm1d(2 * width * 7 * 7),
        nn.ReLU(),
        nn.Unflatten(1, (2 * width, 7, 7)),
        nn.ConvTranspose2d(2 * width, width, 4, 2, 1),
        nn.BatchNorm2d(width),
        nn.ReLU(),  # 14
        nn.ConvTranspose2d(width, data.channels, 4, 2, 1),
        nn.Tanh(),
    )  # 28
    discriminator = nn.Sequential(
        nn.Conv2d(data.channels, width, 4, 2, 1),
        nn.LeakyReLU(0.2),  # 14
        nn.Conv2d(width, 2 * width, 4, 2, 1),
        nn.LeakyReLU(0.2),  # 7
        nn.Flatten(),
        nn.Linear(2 * width * 7 * 7, 1),
        nn.Flatten(0),
    )  # (B,)

    def d_loss(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.real), 1.0) + ampgan.real_fake_loss(ctx.D(ctx.fake), 0.0)

    def g_loss(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.fake), 1.0)

    return ampgan.GAN(generator=generator, discriminator=discriminator, z_dim=z_dim, d_loss=d_loss, g_loss=g_loss)


# tiny_dcgan draws 28 px images; the digits are 32 px unless the settings say otherwise.
SETTINGS = {"data.image_size": 28, "budget.steps": 200}


def answer(study) -> list[str]:
    """The verdict, each raced precision's bench speedup (or why the bench has none: a mode it left out as
    too slow, on a CPU without bf16 instructions), and each precision's final quality."""
    lines = list(study.verdict)
    for precision, speedup in study.speedup.items():
        if speedup["estimate"] is None:
            lines.append(f"{precision}: no bench speedup ({speedup['reason']})")
        else:
            interval = f"95% CI {speedup['low']:.2f}-{speedup['high']:.2f}"
            lines.append(f"{precision}: {speedup['estimate']:.2f}x fp32's speed ({interval})")
    for precision, final in study.final.items():
        lines.append(
            f"{precision}: Fréchet distance {final['frechet_distance']:.2f}, coverage {final.get('coverage', 0):.2f}"
        )
    return lines


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "runs/api-example"
    study = ampgan.compare(tiny_dcgan, out, settings=SETTINGS, precisions=["fp32", "bf16"], seeds=2, log=print)
    print("\n".join(answer(study)))
