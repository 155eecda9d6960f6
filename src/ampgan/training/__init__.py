"""Training the AC-GAN: models, precision policy, state, the step, the budgeted loop, many processes."""
