"""Hardware this machine is not: the step's op table projected onto datasheet GPUs by a kernel model
calibrated on measured GPU kernels."""
