"""Which matrix dimensions keep tensor cores and AMX from full speed: those not a multiple of 8."""

from __future__ import annotations

from torch import nn

from ampgan.gan.contract import DataSpec

# The matrix dimensions of each kind of layer that tensor cores and AMX see.
_DIMENSIONS = (
    ((nn.Conv2d, nn.ConvTranspose2d), ("in_channels", "out_channels")),
    (nn.Linear, ("in_features", "out_features")),
)


TASK_SET_BELOW = 8  # an unmatched size below this is a network's own input or output (see misaligned_layers)


def misaligned_layers(networks: dict[str, nn.Module], data: DataSpec | None = None) -> list[dict]:
    """Every conv/linear dimension that is not a multiple of 8, with the layer and a suggestion.
    Dimensions fixed by the data (image channels) or the task (a real/fake head's 1 output, the class
    count) are marked as such: only the others are the model's to choose."""
    fixed_values = {1, 3} if data is None else {1, data.channels, data.num_classes}
    found = []
    for prefix, network in networks.items():
        layers = [(n, m, d) for n, m in network.named_modules() for k, d in _DIMENSIONS if isinstance(m, k)]
        sizes = [{getattr(m, d[i]) for _, m, d in layers} for i in (0, 1)]  # (inputs, outputs) of its layers
        for name, module, dims in layers:
            for side, dim in enumerate(dims):
                value = getattr(module, dim)
                if value % 8:
                    # A few channels or classes no other layer produces or takes: the network's own input (a pix2pix
                    # D's image pair, 2C) or output (a rotation head's 4 classes), set by the data or the task. A
                    # larger unmatched size (z_dim 100 into G's first layer) is the model's to choose: still named.
                    fixed = (
                        value == 1  # one number in or out (a score, a continuous condition): nothing to pad
                        or value in fixed_values
                        and ("channels" in dim or dim == "out_features")
                        or ("head" in name and dim == "out_features")
                        or value < TASK_SET_BELOW
                        and value not in sizes[1 - side]
                    )
                    found.append(
                        {
                            "layer": f"{prefix}.{name}",
                            "dimension": dim,
                            "value": value,
                            "suggested": (value + 7) // 8 * 8,
                            "fixed_by_task": bool(fixed),
                        }
                    )
    return found


def alignment_warning(networks: dict[str, nn.Module], data: DataSpec) -> str | None:
    """One line naming the adjustable misaligned dimensions, or None."""
    adjustable = [a for a in misaligned_layers(networks, data) if not a["fixed_by_task"]]
    if not adjustable:
        return None
    shown = ", ".join(f"{a['layer']} {a['dimension']}={a['value']} (try {a['suggested']})" for a in adjustable[:6])
    more = f" and {len(adjustable) - 6} more" if len(adjustable) > 6 else ""
    return f"dimensions that are not multiples of 8 keep tensor cores/AMX from full speed: {shown}{more}"
