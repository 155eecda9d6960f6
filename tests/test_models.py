import pytest
import torch

from ampgan.gan import DataSpec
from ampgan.gan.alignment import alignment_warning
from ampgan.gan.models.acgan import Discriminator, Generator
from ampgan.training.precision import PrecisionPolicy

CPU = torch.device("cpu")


def acgan_networks(image_size=32, channels=3, num_classes=10, z_dim=16, width=8, spectral_norm=False):
    data = DataSpec(image_size=image_size, channels=channels, num_classes=num_classes)
    return Generator(data, z_dim, width), Discriminator(data, width, spectral_norm=spectral_norm)


@pytest.mark.parametrize("image_size", [28, 32, 64])
@pytest.mark.parametrize("channels", [1, 3])
def test_shapes_and_value_range(image_size, channels):
    G, D = acgan_networks(image_size, channels)
    z, labels = torch.randn(5, 16), torch.arange(5)
    images = G(z, labels)
    assert images.shape == (5, channels, image_size, image_size)
    assert images.dtype == torch.float32
    assert images.abs().max() <= 1.0  # tanh output
    real_fake, classes = D(images)
    assert real_fake.shape == (5,) and classes.shape == (5, 10)


def test_generator_channel_schedule_for_32_px():
    G, D = acgan_networks(z_dim=128, width=64)
    convs = [m for m in G.modules() if isinstance(m, torch.nn.ConvTranspose2d)]
    assert [(c.in_channels, c.out_channels) for c in convs] == [(256, 128), (128, 64), (64, 3)]
    d_convs = [m for m in D.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [c.out_channels for c in d_convs] == [64, 128, 256]


def test_bf16_autocast_computes_convolutions_in_bfloat16_and_keeps_fp32_parameters():
    _, D = acgan_networks(num_classes=4)
    seen = {}
    conv = D.features[2]  # the second convolution: its input is the first one's bf16 output
    conv.register_forward_hook(lambda module, inputs, output: seen.update(input=inputs[0].dtype, output=output.dtype))
    policy = PrecisionPolicy("bf16", CPU)
    with policy.autocast():
        real_fake, _ = D(torch.randn(4, 3, 32, 32))
    assert seen == {"input": torch.bfloat16, "output": torch.bfloat16}
    real_fake.float().sum().backward()
    assert all(p.dtype == torch.float32 for p in D.parameters())
    assert all(p.grad.dtype == torch.float32 for p in D.parameters() if p.grad is not None)


def test_batch_norm_statistics_stay_fp32_under_bf16():
    bn = torch.nn.BatchNorm2d(8)
    x = torch.randn(16, 8, 4, 4) * 3 + 2
    with PrecisionPolicy("bf16", CPU).autocast():
        bn(x.to(torch.bfloat16))
    assert bn.running_mean.dtype == torch.float32
    # Statistics of the bf16 values, accumulated in FP32 (momentum 0.1 from zero).
    expected = 0.1 * x.to(torch.bfloat16).float().mean(dim=(0, 2, 3))
    torch.testing.assert_close(bn.running_mean, expected, rtol=1e-5, atol=1e-6)


def test_misaligned_dimensions_are_named_with_a_suggestion():
    data = DataSpec(image_size=32, channels=3, num_classes=10)
    aligned = dict(zip("GD", acgan_networks(z_dim=128, width=64)))
    assert alignment_warning(aligned, data) is None
    warning = alignment_warning(dict(zip("GD", acgan_networks(z_dim=100, width=60))), data)
    # The heads' 1 and 10 outputs and the 3 image channels are the task's, never flagged.
    assert "G.project.0 in_features=200 (try 200)" not in warning and "D.features.0 out_channels=60 (try 64)" in warning
    assert "D.real_fake_head" not in warning and "in_channels=3" not in warning


def _largest_singular_value(weight: torch.Tensor) -> float:
    return torch.linalg.matrix_norm(weight.detach().reshape(weight.shape[0], -1).double(), ord=2).item()


def test_spectral_norm_divides_each_weight_by_its_largest_singular_value_in_fp32_under_autocast():
    _, D = acgan_networks(num_classes=4, spectral_norm=True)
    normalised = [m for m in D.modules() if hasattr(m, "normalised_weight")]
    assert len(normalised) == 4  # three convolutions and the real/fake head, not the class head
    for _ in range(200):  # one power iteration per training pass: it converges over passes
        with PrecisionPolicy("bf16", CPU).autocast():
            D(torch.randn(4, 3, 32, 32))
    for module in normalised:
        with PrecisionPolicy("bf16", CPU).autocast():
            weight = module.normalised_weight()
        assert weight.dtype == torch.float32
        assert _largest_singular_value(weight) == pytest.approx(1.0, rel=1e-3)
        assert module.spectral_u.dtype == torch.float32


def test_spectral_norm_keeps_the_weight_names_and_adds_its_vectors_as_buffers():
    (_, plain), (_, normalised) = (acgan_networks(28, 1, 4), acgan_networks(28, 1, 4, spectral_norm=True))
    assert [n for n, _ in plain.named_parameters()] == [n for n, _ in normalised.named_parameters()]
    extra = set(normalised.state_dict()) - set(plain.state_dict())
    assert extra == {
        "features.0.spectral_u",
        "features.0.spectral_v",
        "features.2.spectral_u",
        "features.2.spectral_v",
        "real_fake_head.spectral_u",
        "real_fake_head.spectral_v",
    }


def test_spectral_norm_backward_runs_after_two_passes_and_eval_passes_leave_the_vectors_alone():
    _, D = acgan_networks(28, 1, 4, spectral_norm=True)
    # D's update scores a real and a fake batch, then runs one backward: the in-place power
    # iteration of the second pass must not invalidate what the first saved.
    (D(torch.randn(4, 1, 28, 28))[0].sum() + D(torch.randn(4, 1, 28, 28))[0].sum()).backward()
    assert all(p.grad is not None for n, p in D.named_parameters() if not n.startswith("class_head"))
    D.eval()
    before = D.real_fake_head.spectral_u.clone()
    D(torch.randn(4, 1, 28, 28))
    assert torch.equal(D.real_fake_head.spectral_u, before)


def test_one_meta_build_serves_every_preparation_of_the_same_model_and_data():
    """A study prepares its model for every precision, seed and timer: the shapes-only build (and its
    traces) is made once per function, options and data, and again when any of them changes."""
    from ampgan.gan import registry
    from ampgan.training.memory import trace_step_elements

    builds = []

    def counted(data, **options):
        builds.append(options)
        return registry.resolve_model("acgan", {"width": 8}).builder(data, **options)

    data, other_data = DataSpec(image_size=32, channels=3, num_classes=4), DataSpec(32, 1, 4)
    recipe = registry.ModelRecipe("counted", counted, {"width": 8})
    first = registry.build_on_meta(recipe, data)
    assert registry.build_on_meta(registry.ModelRecipe("counted", counted, {"width": 8}), data) is first
    assert len(builds) == 1 and all(p.is_meta for p in first.generator.parameters())
    assert trace_step_elements(first, data, 4) == trace_step_elements(first, data, 4) > 0
    assert registry.build_on_meta(registry.ModelRecipe("counted", counted, {"width": 16}), data) is not first
    assert registry.build_on_meta(recipe, other_data) is not first
    assert len(builds) == 3
