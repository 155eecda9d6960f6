"""The command line's shortcuts for config fields, declared once: each flag's name, the config paths it
sets, its help and the kind of value it takes.

`--batch-size 128` is `--set budget.batch_size=128`. The common flags are a command's options, listed by
`--help`; the others (`common=False`) are no option (a command parses what it shows): they are reached as
`--set PATH=VALUE` (`ampgan config --list` shows every path), and their name given as a flag is one error
line naming that path. The click options (cli/options.py), the
Python API's option names (`config_from_options(batch_size=128)`) and the docs' table
(`ampgan config --list --markdown`) are all made from this list; a flag's default is the config's own,
read from the tree (config/tree.py), never written here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ampgan.data.registry import dataset_names


@dataclass(frozen=True)
class Flag:
    name: str  # the option's name with underscores ("batch_size" -> --batch-size)
    paths: tuple[str, ...]  # the config paths it sets
    help: str
    # What it takes: text, whole, whole0 (>= 0), positive, duration, loss_scale, precision, device,
    # channels, names, switch (--x/--no-x), flag (on when given), steps_or_duration.
    value: str = "text"
    common: bool = True  # an option listed by --help; else reached as --set PATH only

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")


FLAGS: tuple[Flag, ...] = (
    Flag(
        "dataset",
        ("data.dataset",),
        "A registered dataset (" + ", ".join(dataset_names()) + "; digits is embedded) or folder:PATH.",
    ),
    Flag("data_dir", ("data.data_dir",), "Where a file-based dataset lives (cifar10, quickdraw, mnist)."),
    Flag(
        "image_size",
        ("data.image_size",),
        "Resize the data (default: the dataset's size; the model says which it draws).",
        "whole4",
    ),
    Flag("channels", ("data.channels",), "Grey or colour (default: the dataset's).", "channels", common=False),
    Flag(
        "classes",
        ("data.classes",),
        "Quick, Draw! classes, comma-separated (default: the study's ten).",
        "names",
        common=False,
    ),
    Flag("max_per_class", ("data.max_per_class",), "Quick, Draw!: rows read per class.", "whole", common=False),
    Flag("download", ("data.download",), "Fetch missing dataset files (cifar10, quickdraw).", "flag"),
    Flag("cache", ("data.cache",), "folder:PATH: keep a verified .npz cache next to the images.", "flag", common=False),
    Flag(
        "model",
        ("model.name",),
        "The GAN: acgan (default), acgan-2019 (the study's network), dcgan, wgan-gp, r1, "
        "or your own as path/to/file.py:FUNCTION or package.module:FUNCTION (imported and run; "
        "docs/your-gan.md).",
    ),
    Flag(
        "width",
        ("model.width",),
        "Model option `width` (the built-ins' channels w, 2w, 4w; acgan 64, dcgan/wgan-gp 32, r1 16).",
        "whole",
    ),
    Flag("z_dim", ("model.z_dim",), "Model option `z_dim`: the noise size.", "whole", common=False),
    Flag(
        "lr",
        ("optim.lr_g", "optim.lr_d"),
        "Adam's learning rate for both networks (default: the model's).",
        "positive",
        common=False,
    ),
    Flag("precision", ("precision.name",), "fp32 (default), tf32, bf16 or fp16.", "precision"),
    Flag(
        "loss_scale",
        ("precision.loss_scale",),
        "fp16 only: 'dynamic' (GradScaler, the default) or a fixed number such as 128.",
        "loss_scale",
    ),
    Flag("device", ("compute.device",), "auto (default), cpu or cuda.", "device"),
    Flag(
        "channels_last",
        ("compute.channels_last",),
        "NHWC (or, with --no-, NCHW) memory format for every "
        "precision; default: measured per precision on this machine (cached), channels-last where it is faster.",
        "switch",
    ),
    Flag(
        "compile",
        ("compute.compile",),
        "torch.compile the networks (or, with --no-, run them eager); default: "
        "compiled where it pays for its compile time over the run's length on this machine (measured once, "
        "cached).",
        "switch",
    ),
    Flag("sync_bn", ("compute.sync_bn",), "With several processes: SyncBatchNorm (CUDA only).", "flag", common=False),
    Flag("batch_size", ("budget.batch_size",), "Per process.", "whole"),
    Flag("steps", ("budget.steps",), "Stop after this many steps (one step: one G update).", "whole"),
    Flag(
        "time_budget",
        ("budget.time_budget_s",),
        "Stop after this much training wall time, e.g. 7m, 90s, 1h.",
        "duration",
    ),
    Flag(
        "checkpoint_every",
        ("checkpoints.every_steps", "checkpoints.every_s"),
        "Steps (500) or training time (10m) between checkpoints.",
        "steps_or_duration",
    ),
    Flag("keep", ("checkpoints.keep",), "How many recent checkpoints to keep.", "whole", common=False),
    Flag("sample_every", ("logging.sample_every",), "Steps between sample grids.", "whole", common=False),
    Flag("log_every", ("logging.log_every",), "Steps between metric records.", "whole", common=False),
    Flag(
        "samples_per_class", ("logging.samples_per_class",), "Images per class in a sample grid.", "whole", common=False
    ),
    Flag("tensorboard", ("logging.tensorboard",), "Also write TensorBoard event files.", "flag", common=False),
    Flag("seed", ("seed",), "Seeds weights, data order, noise and evaluation.", "whole0"),
)
FLAGS_BY_NAME: dict[str, Flag] = {flag.name: flag for flag in FLAGS}


def flag_for_path(path: str) -> Flag | None:
    """The flag that sets a config path ('budget.batch_size' -> --batch-size), if one does."""
    return next((flag for flag in FLAGS if path in flag.paths), None)


def spec_field(default, help: str, value: str = "text", *, common: bool = True, flag: str | None = None):
    """A field of a command's own spec (CompareSpec, BenchSpec) declared with its command-line option: the
    dataclass default is the only default, `help` the only help. `value` as for Flag, plus path, int_list,
    precision_list, fraction, whole2; `common=False`: reached as `--set SPEC.FIELD=VALUE` (the flag still
    works, with a notice); `flag`: the option's name when it is not --field-name."""
    return field(default=default, metadata={"option": {"help": help, "value": value, "common": common, "flag": flag}})


def nested_spec(default, *set_by_owner: str):
    """A field of a command's spec that is another command's spec (compare's bench: a BenchSpec, `default` its
    values there), its settings reached as `--set SPEC.FIELD.SETTING=VALUE`; `set_by_owner`: its fields the
    outer spec sets itself (no setting)."""
    return field(default=default, metadata={"nested": set_by_owner})


def spec_settings(spec_class) -> list[tuple[str, object, dict]]:
    """(name, default, its option's declaration) of every setting of a spec dataclass (spec_field), a nested
    spec's (nested_spec) as 'FIELD.SETTING' with its default there."""
    return [(f.name, f.default, f.metadata["option"]) for f in fields(spec_class) if "option" in f.metadata] + [
        (f"{f.name}.{name}", getattr(f.default, name), declared)
        for f in fields(spec_class)
        if "nested" in f.metadata
        for name, _, declared in spec_settings(type(f.default))
        if name not in f.metadata["nested"]
    ]


def as_tuples(values: dict) -> dict:
    """A list given for a tuple-valued setting (batch sizes, precisions), as a spec holds it."""
    return {key: tuple(value) if isinstance(value, list) else value for key, value in values.items()}
