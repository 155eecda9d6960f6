"""`ampgan preflight`: will this GAN work under ampgan and under mixed precision? One line per finding."""

from __future__ import annotations

import click

from ampgan.cli.options import DATA_AND_MODEL, config_from_cli, spec_options
from ampgan.errors import say


@click.command("preflight")
@spec_options(parts=(*DATA_AND_MODEL, "seed"))
@click.pass_context
def command(ctx: click.Context, **options) -> None:
    """Check a GAN before training it: G's output shape and range, D's last operation, parameters without
    gradients, losses on fp16/bf16 tensors or refused by autocast, a loss that carries the fp16 loss scale,
    self-cast weights, state that checkpoints cannot hold. Exit 2 when something cannot work. It runs the
    model's code (one training step on the CPU), as training would."""
    from ampgan.doctor.preflight import check_before_training

    config = config_from_cli(ctx, options)
    findings = check_before_training(config, log=say)
    say(
        f"preflight: model {config.model.name}: "
        + (f"{len(findings)} warning(s), nothing that stops training" if findings else "nothing found")
    )
