"""Legal PyTorch that GANs users bring, and ampgan's built-ins do not have, taken as it is: a 5-D weight
(StyleGAN2's modulated weight kept as (1, out, in, k, k), a Conv3d) under channels-last, buffers that are
not fp32 (an fp64 running count, a complex FFT filter), a PatchGAN D scoring each patch (pix2pix,
CycleGAN), squares taken under other names in the losses."""

import textwrap

import pytest
import torch
import torch.nn.functional as F

import ampgan
from ampgan.config import config_from_options
from ampgan.data.synthetic import make_synthetic
from ampgan.doctor.preflight import preflight
from ampgan.errors import AmpganError
from ampgan.training.precision import PrecisionPolicy
from ampgan.training.state import build_train_state
from ampgan.training.step import train_step

USER_GANS = textwrap.dedent("""
    import copy
    import torch
    import torch.nn.functional as F
    from torch import nn
    import ampgan

    class Modulated(nn.Module):
        '''A G whose 3x3 convolution weight is stored 5-D, (1, out, in, 3, 3), modulated per image and run
        as one grouped convolution (StyleGAN2's layout), with buffers in fp64 and complex64.'''
        def __init__(self, data, width=8):
            super().__init__()
            self.width, self.size = width, data.image_size
            self.fc = nn.Linear(16, width * data.image_size ** 2)
            self.weight = nn.Parameter(torch.randn(1, width, width, 3, 3) / 6)
            self.style = nn.Linear(16, width)
            self.out = nn.Conv2d(width, data.channels, 1)
            self.register_buffer("calls", torch.zeros((), dtype=torch.float64))
            self.register_buffer("spectrum", torch.ones(data.image_size, data.image_size // 2 + 1,
                                                        dtype=torch.complex64))

        def forward(self, z):
            b = z.shape[0]
            x = self.fc(z).view(1, b * self.width, self.size, self.size)
            weight = self.weight * self.style(z).view(b, 1, self.width, 1, 1)
            x = F.conv2d(x, weight.reshape(-1, self.width, 3, 3), padding=1, groups=b)
            x = self.out(x.view(b, self.width, self.size, self.size)).float()
            self.calls += 1
            return torch.tanh(torch.fft.irfft2(torch.fft.rfft2(x) * self.spectrum, s=x.shape[-2:]))

    def patch_d(data):  # (B, C, H, W) -> (B, 1, H/4, W/4): one logit per patch
        return nn.Sequential(nn.Conv2d(data.channels, 8, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 4, 2, 1))

    def bce_d(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.real), 1.0) + ampgan.real_fake_loss(ctx.D(ctx.fake), 0.0)

    def bce_g(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.fake), 1.0)

    def patches(data, *, loss="bce"):
        d_loss, g_loss = bce_d, bce_g
        if loss == "hinge":
            d_loss = lambda ctx: ampgan.hinge_loss(ctx.D(ctx.real), "real") + ampgan.hinge_loss(ctx.D(ctx.fake), "fake")
            g_loss = lambda ctx: ampgan.hinge_loss(ctx.D(ctx.fake), "generator")
        return ampgan.GAN(generator=Modulated(data), discriminator=patch_d(data), z_dim=16, d_loss=d_loss,
                          g_loss=g_loss)

    def sigmoid_g(data, *, image_range=(-1.0, 1.0)):  # a G that draws [0, 1]
        shape = (data.channels, data.image_size, data.image_size)
        G = nn.Sequential(nn.Linear(16, shape[0] * shape[1] * shape[2]), nn.Sigmoid(), nn.Unflatten(1, shape))
        return ampgan.GAN(generator=G, discriminator=patch_d(data), z_dim=16, image_range=image_range,
                          d_loss=bce_d, g_loss=bce_g)

    class ClampGrad(torch.autograd.Function):  # a 'gradient clip layer': identity forward, clamped backward
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return grad.clamp(-1, 1)

    class ClampedD(nn.Module):
        def __init__(self, data, how):
            super().__init__()
            self.how, self.c1, self.c2 = how, nn.Conv2d(data.channels, 8, 4, 2, 1), nn.Conv2d(8, 1, 4, 2, 1)

        def forward(self, x):
            h = self.c1(x)
            if self.how == "function":
                h = ClampGrad.apply(h)
            elif self.how == "hook" and h.requires_grad:
                h.register_hook(lambda grad: grad.clamp(-1, 1))
            return self.c2(F.leaky_relu(h, 0.2))

    def clamped_backward(data, *, how="function"):
        return ampgan.GAN(generator=Modulated(data), discriminator=ClampedD(data, how), z_dim=16, d_loss=bce_d,
                          g_loss=bce_g)

    def zero_initialised_out(data):  # tanh(0): every pixel at the middle of [-1, 1] before the first step
        generator = Modulated(data)
        nn.init.zeros_(generator.out.weight)
        nn.init.zeros_(generator.out.bias)
        return ampgan.GAN(generator=generator, discriminator=patch_d(data), z_dim=16, d_loss=bce_d, g_loss=bce_g)

    def averaged(data):  # an EMA of a G with fp64 and complex buffers
        return ampgan.GAN(generator=Modulated(data), discriminator=patch_d(data), z_dim=16, d_loss=bce_d,
                          g_loss=bce_g, ema=ampgan.EMA(decay=0.9))

    OUTSIDE = nn.Parameter(torch.ones(()))

    def term_outside_both_networks(data):  # a term whose gradient reaches no parameter of G or D
        return ampgan.GAN(generator=Modulated(data), discriminator=patch_d(data), z_dim=16,
                          d_loss=[bce_d, lambda ctx: (OUTSIDE * 0.0).sum()], g_loss=bce_g)

    def penalty_and_memo(data):  # a closure holding D's weight (a penalty on it) and a memo filled on first call
        D = patch_d(data)
        w, memo = D[2].weight, {}
        def d_loss(ctx):
            if "ones" not in memo:
                memo["ones"] = torch.ones(())
            return bce_d(ctx) + 1e-3 * w.pow(2).sum() * memo["ones"]
        return ampgan.GAN(generator=Modulated(data), discriminator=D, z_dim=16, d_loss=d_loss, g_loss=bce_g)

    class PathLengthLoss:  # StyleGAN2's shape: a loss object whose g_loss method keeps pl_mean
        def __init__(self):
            self.pl_mean = torch.zeros(())

        def g_loss(self, ctx):
            loss = bce_g(ctx)
            self.pl_mean = self.pl_mean + 0.01 * (loss.detach() - self.pl_mean)
            return loss

    def pl_mean_on_a_loss_object(data):
        return ampgan.GAN(generator=Modulated(data), discriminator=patch_d(data), z_dim=16, d_loss=bce_d,
                          g_loss=PathLengthLoss().g_loss)

    class PathLengthModule(nn.Module):  # the loss as an nn.Module of its own, pl_mean a buffer of it: no checkpoint's
        def __init__(self):
            super().__init__()
            self.register_buffer("pl_mean", torch.zeros(()))

        def forward(self, ctx):
            loss = bce_g(ctx)
            self.pl_mean.lerp_(loss.detach(), 0.01)
            return loss

    def pl_mean_on_a_loss_module(data):
        return ampgan.GAN(generator=Modulated(data), discriminator=patch_d(data), z_dim=16, d_loss=bce_d,
                          g_loss=PathLengthModule())

    def module_in_a_closure(data):  # the loss module held by a closure (not given as the loss itself)
        running = PathLengthModule()
        return ampgan.GAN(generator=Modulated(data), discriminator=patch_d(data), z_dim=16, d_loss=bce_d,
                          g_loss=lambda ctx: running(ctx))

    def ema_of_g_in_a_closure(data):  # the user's own average of G, moved toward G in g_loss, before G's update
        G = Modulated(data)
        ema = [copy.deepcopy(G).requires_grad_(False)]
        def g_loss(ctx):
            with torch.no_grad():
                for kept, p in zip(ema[0].parameters(), G.parameters()):
                    kept.lerp_(p, 0.001)
            return bce_g(ctx)
        return ampgan.GAN(generator=G, discriminator=patch_d(data), z_dim=16, d_loss=bce_d, g_loss=g_loss)

    class HeadD(nn.Module):  # a user's way to keep D's head in fp32: .float() on its input (autocast undoes it)
        def __init__(self, data, island=False):
            super().__init__()
            self.body, self.head, self.island = patch_d(data), nn.Linear(data.image_size ** 2 // 16, 1), island
            self.head2 = nn.Linear(1, 1)
        def forward(self, x):
            return self.head2(self.head(self.body(x).flatten(1).float()))

    def float_before_a_layer(data, *, island=False):  # island: the head in fp32_modules, and D's input cast
        D = HeadD(data)
        fake = lambda ctx: ctx.fake.float() if island else ctx.fake
        return ampgan.GAN(generator=Modulated(data), discriminator=D, z_dim=16, fp32_modules=[D.head] if island else (),
                          d_loss=[lambda ctx: ampgan.real_fake_loss(ctx.D(ctx.real), 1.0),
                                  lambda ctx: ampgan.real_fake_loss(ctx.D(fake(ctx)), 0.0)],
                          g_loss=lambda ctx: ampgan.real_fake_loss(ctx.D(fake(ctx)), 1.0))

    def frozen_net_in_a_closure(data):  # a fixed feature network and G itself in a closure: constants, not state
        G, features = Modulated(data), patch_d(data).requires_grad_(False)
        def g_loss(ctx):
            return bce_g(ctx) + 0.1 * features(ctx.fake).float().mean().abs() + 0 * G.out.weight.sum()
        return ampgan.GAN(generator=G, discriminator=patch_d(data), z_dim=16, d_loss=bce_d, g_loss=g_loss)

    class RunningD(nn.Sequential):  # D's own method keeping an unregistered running value: not in its state_dict
        def loss(self, ctx):
            real = ctx.D(ctx.real)
            self.running = 0.9 * self.running + 0.1 * real.detach().mean()
            return bce_d(ctx)

    def running_on_d_unregistered(data):
        D = RunningD(*patch_d(data))
        D.running = torch.zeros(())  # a plain attribute, not register_buffer
        return ampgan.GAN(generator=Modulated(data), discriminator=D, z_dim=16, d_loss=D.loss, g_loss=bce_g)

    def penalty_on_a_view_of_d(data):  # a penalty on part of D's weight: a view at an offset is still D's
        D = patch_d(data)
        w = D[2].weight[0, 1:]
        return ampgan.GAN(generator=Modulated(data), discriminator=D, z_dim=16,
                          d_loss=lambda ctx: bce_d(ctx) + 1e-3 * w.pow(2).sum(), g_loss=bce_g)

    class ScoringD(nn.Sequential):  # least squares written as D's own method
        def loss(self, ctx):
            return (ctx.D(ctx.real) - 1).square().mean() + ctx.D(ctx.fake).square().mean()

    def loss_as_a_method_of_d(data):
        D = ScoringD(*patch_d(data))
        return ampgan.GAN(generator=Modulated(data), discriminator=D, z_dim=16, d_loss=D.loss, g_loss=bce_g)

    def squares_by_other_names(data):  # least squares, written as .square() and a vector norm
        def d_loss(ctx):
            return (ctx.D(ctx.real) - 1).square().mean() + torch.linalg.vector_norm(ctx.D(ctx.fake)) / 4
        return ampgan.GAN(generator=Modulated(data), discriminator=patch_d(data), z_dim=16, d_loss=d_loss,
                          g_loss=lambda ctx: (ctx.D(ctx.fake) - 1).square().mean())

    class Styled(nn.Module):  # StyleGAN2's split: a mapping network, and a synthesis method on w
        def __init__(self, data):
            super().__init__()
            self.mapping, self.body = nn.Linear(16, 16), Modulated(data)

        def synthesis(self, w):
            return self.body(w / w.square().mean(1, keepdim=True).add(1e-8).sqrt())  # pixel norm, in G's layers

        def forward(self, z):
            return self.synthesis(self.mapping(z))

    def parts_of_g_in_a_loss(data):  # path length calls G's parts itself, so G's forward never runs
        def path_length(ctx):
            w = ctx.G.mapping(ctx.draw()[0])
            images = ctx.G.synthesis(w)
            return ctx.input_gradients(images * torch.randn_like(images), w).flatten(1).float().pow(2).sum(1).mean()
        return ampgan.GAN(generator=Styled(data), discriminator=patch_d(data), z_dim=16, d_loss=bce_d,
                          g_loss=bce_g, extra_updates=[ampgan.Update("pl", path_length, networks=("generator",))])

    def pl_mean_in_a_closure(data):  # StyleGAN2's pl_mean ported as the loss object's state, here a closure's
        kept = {}
        def path_length(ctx):
            w = ctx.G.mapping(ctx.draw()[0])
            images = ctx.G.synthesis(w)
            lengths = ctx.input_gradients(images * torch.randn_like(images), w).float().pow(2).sum(1).sqrt()
            mean = kept.get("pl_mean", lengths.mean().detach())
            kept["pl_mean"] = mean + 0.01 * (lengths.mean().detach() - mean)
            return (lengths - mean).pow(2).mean()
        return ampgan.GAN(generator=Styled(data), discriminator=patch_d(data), z_dim=16, d_loss=bce_d,
                          g_loss=bce_g, extra_updates=[ampgan.Update("pl", path_length, networks=("generator",))])

    class ClampedG(nn.Module):  # the clamping backward inside G: only G's update reaches it
        def __init__(self, data):
            super().__init__()
            shape = (data.channels, data.image_size, data.image_size)
            self.fc, self.out = nn.Linear(16, 64), nn.Sequential(nn.Linear(64, shape[0] * shape[1] * shape[2]),
                                                                nn.Tanh(), nn.Unflatten(1, shape))

        def forward(self, z):
            return self.out(ClampGrad.apply(self.fc(z)))

    def clamped_in_g(data):
        return ampgan.GAN(generator=ClampedG(data), discriminator=patch_d(data), z_dim=16, d_loss=bce_d,
                          g_loss=bce_g)

    def adaptive_weight(data):  # VQGAN's: the GAN term weighted by the ratio of gradient norms at G's last layer
        G = Modulated(data)
        def g_loss(ctx):
            rec = (ctx.fake.float() - ctx.fake.detach().float().mean()).abs().mean()
            gan = bce_g(ctx)
            last = G.out.weight
            ratio = ctx.input_gradients(rec, last).norm() / (ctx.input_gradients(gan, last).norm() + 1e-4)
            return rec + ratio.detach() * gan
        return ampgan.GAN(generator=G, discriminator=patch_d(data), z_dim=16, d_loss=bce_d, g_loss=g_loss)

    class StddevD(nn.Module):  # StyleGAN2's minibatch stddev on zero-padded features: a variance of exactly 0
        def __init__(self, data, in_fp32):
            super().__init__()
            self.in_fp32, self.c1, self.c2 = in_fp32, nn.Conv2d(data.channels, 8, 4, 2, 1), nn.Conv2d(9, 1, 4, 2, 1)

        def forward(self, x):
            x = torch.cat([torch.full_like(x[:, :, :4], -1.0), x[:, :, 4:]], 2)  # a blank top, as digits have
            h = self.c1(x)  # (B, 8, H/2, W/2): its top rows are the same in every image
            y = h.float() if self.in_fp32 else h
            std = (y - y.mean(0)).pow(2).mean(0).add(1e-8).sqrt().mean()  # 1e-8 is 0 in fp16
            return self.c2(torch.cat([h, std.to(h.dtype).expand(h.shape[0], 1, *h.shape[2:])], 1))

    class CountingD(nn.Sequential):  # ADA's running statistics, one kept out of the state_dict
        def __init__(self, data, persistent):
            super().__init__(*patch_d(data))
            self.register_buffer("seen", torch.zeros(()), persistent=persistent)
            self.register_buffer("kernel", torch.ones(3), persistent=False)  # a constant: nothing to save

        def forward(self, x):
            self.seen += x.shape[0]
            return super().forward(x)

    def non_persistent_state(data, *, persistent=False):
        return ampgan.GAN(generator=Modulated(data), discriminator=CountingD(data, persistent), z_dim=16,
                          d_loss=bce_d, g_loss=bce_g)

    def minibatch_stddev(data, *, in_fp32=False):
        return ampgan.GAN(generator=Modulated(data), discriminator=StddevD(data, in_fp32), z_dim=16,
                          d_loss=bce_d, g_loss=bce_g)
""")


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "user_gans.py"
    path.write_text(USER_GANS)
    return path


def _findings(models, function, sets=()):
    config = config_from_options(model=f"{models}:{function}", dataset="synthetic", image_size=8, sets=sets)
    return {(f.severity, f.check): f.text for f in preflight(config, make_synthetic(image_size=8, count=32))}


@pytest.mark.parametrize("loss", ["bce", "hinge"])
def test_preflight_takes_patch_scores_a_5d_weight_and_buffers_that_are_not_fp32(models, loss):
    """Before: the fp64 and complex buffers were 'weights that are not fp32' (the model casting itself),
    and a PatchGAN's (B, 1, H, W) scores were refused by real_fake_loss and hinge_loss."""
    assert _findings(models, "patches", [f"model.loss={loss}"]) == {}


def test_squares_under_other_names_are_fragile_in_the_losses(models):
    """`.square()` and `torch.linalg.vector_norm` on fp16/bf16 scores flush small values as `pow` does."""
    fragile = _findings(models, "squares_by_other_names")[("warning", "fragile")]
    assert "square" in fragile and "linalg_vector_norm" in fragile


def test_what_g_s_own_layers_compute_is_not_the_loss_s_even_when_a_loss_calls_them_directly(models):
    """Path length calls G.mapping and G.synthesis rather than G: their layers' squares were taken for the loss
    code's, and the warning told the user to cast D's output, which was not where they were."""
    assert ("warning", "fragile") not in _findings(models, "parts_of_g_in_a_loss")


def test_state_a_loss_keeps_outside_g_and_d_is_named_as_lost_on_resume(models):
    """A running mean kept in the loss's closure (or a loss object's attribute) is in no checkpoint: a resumed
    run restarted it and went on silently other than the uninterrupted run. Constants in closures are not state."""
    assert (
        "(`kept`, empty until the first step filled it)"
        in _findings(models, "pl_mean_in_a_closure")[("warning", "outside")]
    )
    assert ("warning", "outside") not in _findings(models, "parts_of_g_in_a_loss")


def test_loss_state_is_found_on_a_loss_object_and_d_s_own_weight_or_a_memo_is_not_called_lost(models):
    """StyleGAN2's g_loss=loss.g_loss keeps pl_mean on its object: it went unseen. A closure holding D's weight for
    a penalty was called state (the optimizer moves it, the checkpoint holds it); a memo filled on the first call
    was called state for sure, though one step cannot tell it from one."""
    assert (
        "keep state between steps outside G and D (`pl_mean`)"
        in _findings(models, "pl_mean_on_a_loss_object")[("warning", "outside")]
    )
    said = _findings(models, "penalty_and_memo")[("warning", "outside")]
    assert said.startswith("the losses may keep state between steps outside G and D (`memo`, empty until the first")
    assert "`w`" not in said


def test_state_on_a_loss_module_or_unregistered_on_d_is_found_and_a_view_of_d_s_weight_is_not(models):
    """A loss written as an nn.Module (pl_mean its buffer) and an unregistered tensor D's loss method keeps were
    skipped as 'a module's own' (only G's and D's registered state is in the checkpoint); a penalty on a view of D's
    weight at an offset was called state (its data_ptr is not the weight's)."""
    assert "(`pl_mean`)" in _findings(models, "pl_mean_on_a_loss_module")[("warning", "outside")]
    assert "(`running`)" in _findings(models, "running_on_d_unregistered")[("warning", "outside")]
    assert _findings(models, "penalty_on_a_view_of_d") == {}


def test_a_module_a_loss_closure_holds_is_state_and_a_copy_of_g_is_named_before_it_moves(models):
    """A module in a loss's closure was skipped whole: its running buffer, and a user's own average of G (kept
    beside the networks, which one step cannot move: g_loss runs before G's first update), were in no checkpoint,
    unsaid. A frozen feature network and G itself in a closure are not state."""
    assert "(`running`)" in _findings(models, "module_in_a_closure")[("warning", "outside")]
    said = _findings(models, "ema_of_g_in_a_closure")[("warning", "outside")]
    assert "(`ema`)" in said and "GAN(ema=ampgan.EMA(decay))" in said
    assert ("warning", "outside") not in _findings(models, "frozen_net_in_a_closure")


def test_a_float_before_a_layer_is_said_not_to_keep_it_in_fp32_and_fp32_modules_is_the_fix(models):
    """`self.head(x.float())` looks like an fp32 layer and computes in bf16 under autocast all the same (the user's
    file read as fp32 islands that were not there). Listed in fp32_modules it is fp32, and a cast of D's own input
    in the loss is no such attempt: neither is named."""
    said = _findings(models, "float_before_a_layer")[("warning", "float")]
    assert said.startswith("D.head take(s) an input cast to fp32 (.float())") and "fp32_modules" in said
    assert ("warning", "float") not in _findings(models, "float_before_a_layer", ["model.island=true"])


def test_squares_in_a_loss_written_as_a_method_of_d_are_the_loss_s(models):
    """d_loss=D.loss has D as its `self`: every square under it was taken for D's layers', and none was said."""
    assert "square" in _findings(models, "loss_as_a_method_of_d")[("warning", "fragile")]


@pytest.mark.parametrize("how", ["function", "hook"])
def test_a_backward_that_clamps_scaled_gradients_is_an_error(models, how):
    """A custom backward (or a tensor hook) that clamps at +-1 leaves fp32's gradients alone and clips every
    fp16 one, which arrives multiplied by the loss scale: D's first layer learns 1/65536 as fast, silently."""
    config = config_from_options(
        model=f"{models}:clamped_backward", dataset="synthetic", image_size=8, sets=[f"model.how={how}"]
    )
    d_term, g_term = (f.text for f in preflight(config, make_synthetic(image_size=8, count=32)))
    assert d_term.startswith("d_loss term 1: the gradients of D.c1.weight, D.c1.bias under fp16 loss scaling, unscaled")
    assert "clamps or compares gradients" in d_term and "D.c2" not in d_term
    # G's gradients pass through D's clamped backward as D's input gradients: G learns as slowly
    assert g_term.startswith("g_loss: the gradients of G.")
    assert _findings(models, "clamped_backward", ["model.how=plain"]) == {}


def test_preflight_gives_g_loss_the_fakes_with_g_s_graph_as_the_step_does(models):
    """Preflight ran g_loss on detached fakes: a g_loss taking gradients of G's own weights (VQGAN's adaptive
    weight) was refused ('g_loss failed: ... does not require grad') though it trains, and a backward in G that
    clamps scaled gradients went unseen, G's gradients never being compared."""
    assert _findings(models, "adaptive_weight") == {}
    text = _findings(models, "clamped_in_g")[("error", "scaling")]
    assert "g_loss: the gradients of G.fc.weight, G.fc.bias under fp16 loss scaling, unscaled, are not fp32's" in text


def test_a_zero_initialised_g_at_the_middle_of_the_range_is_not_a_sigmoid_g(models):
    """Every pixel exactly at the middle (a zero-initialised last layer under tanh) is not 'never below it'."""
    assert _findings(models, "zero_initialised_out") == {}


def test_the_average_of_g_keeps_its_buffers_dtypes(models):
    """The EMA copy is fp32 in its parameters; an fp64 count stays fp64 (it was rounded to fp32 at each copy)."""
    from ampgan.training.ema import attach_average

    config = config_from_options(model=f"{models}:averaged", dataset="synthetic", image_size=8, channels_last=False)
    recipe = ampgan.gan.resolve_model(config.model.name, config.model.options)
    data = ampgan.DataSpec(image_size=8, channels=3, num_classes=2)
    state = build_train_state(config, recipe, data, PrecisionPolicy("fp32", torch.device("cpu")))
    attach_average(state.gan)
    buffers = dict(state.gan.averaged_generator.named_buffers())
    assert buffers["calls"].dtype == torch.float64 and buffers["spectrum"].dtype == torch.complex64


def test_a_term_whose_gradient_reaches_neither_network_is_not_compared(models):
    """Its gradients are no network's: nothing to compare (max() of nothing was a ValueError traceback)."""
    assert _findings(models, "term_outside_both_networks") == {}


def test_a_sigmoid_g_on_data_in_minus_one_to_one_is_named(models):
    """Nothing of its output lies outside [-1, 1], yet D tells its fakes by never seeing a dark pixel."""
    text = _findings(models, "sigmoid_g")[("warning", "range")]
    assert "none of it in the lower half of the data range [-1, 1]" in text and "GAN.image_range" in text
    assert _findings(models, "sigmoid_g", ["model.image_range=[0.0, 1.0]"]) == {}


def test_a_5d_weight_is_left_as_it_is_under_channels_last_and_trains(models):
    """Module.to(memory_format=channels_last) raises on a 5-D tensor: train, bench and compare stopped with a
    traceback whenever channels-last was measured or asked for."""
    config = config_from_options(
        model=f"{models}:patches", dataset="synthetic", image_size=8, batch_size=4, channels_last=True
    )
    recipe = ampgan.gan.resolve_model(config.model.name, config.model.options)
    data = ampgan.DataSpec(image_size=8, channels=3, num_classes=2)
    torch.manual_seed(0)
    expected = recipe.build(data).generator.weight.detach().clone()
    state = build_train_state(config, recipe, data, PrecisionPolicy("fp32", torch.device("cpu")))
    generator, discriminator = state.gan.generator, state.gan.discriminator
    assert torch.equal(generator.weight, expected) and generator.weight.is_contiguous()
    assert discriminator[0].weight.is_contiguous(memory_format=torch.channels_last)
    assert generator.calls.dtype == torch.float64 and generator.spectrum.dtype == torch.complex64
    batch = (torch.rand(4, 3, 8, 8) * 2 - 1, torch.zeros(4, dtype=torch.long))
    metrics = train_step(state, lambda: batch)
    assert torch.isfinite(metrics["loss_d"]) and torch.isfinite(metrics["loss_g"])
    assert not torch.equal(generator.weight, expected)


def test_patch_scores_are_averaged_over_the_patches_and_a_class_head_is_still_refused():
    scores = torch.randn(4, 1, 3, 3)
    assert torch.allclose(
        ampgan.real_fake_loss(scores, 1.0), F.binary_cross_entropy_with_logits(scores, torch.ones_like(scores))
    )
    assert torch.allclose(ampgan.hinge_loss(scores, "real"), F.relu(1 - scores).mean())
    for wrong in (torch.randn(4, 3), torch.randn(4, 2, 3, 3)):
        with pytest.raises(AmpganError, match="one per image"):
            ampgan.real_fake_loss(wrong, 1.0)


def test_gradients_inf_or_nan_under_fp16_without_scaling_are_an_error_naming_what_they_reach(models):
    """A minibatch stddev's sqrt(var + 1e-8) in fp16 (1e-8 rounds to 0) has an infinite derivative where the
    variance is 0: every fp16 gradient upstream of it is NaN at any loss scale. Preflight said nothing (a
    non-finite fp16 gradient was taken for an overflow the scaler skips), and fp16 training skipped every update
    until the scale collapsed, told 'overflow at any scale ... lower the learning rate'."""
    found = _findings(models, "minibatch_stddev")
    assert found[("error", "fp16-nan")].startswith(
        "d_loss term 1: the gradients of D.c1.weight, D.c1.bias are inf or NaN under fp16 even without loss scaling"
    )
    assert "D.c2" not in found[("error", "fp16-nan")].split("(finite")[0]
    assert _findings(models, "minibatch_stddev", ["model.in_fp32=true"]) == {}


def test_a_collapsed_loss_scale_is_said_as_gradients_non_finite_unscaled_not_as_a_learning_rate():
    from ampgan.training.faults import FaultMonitor

    record = {"step": 30, "loss_scale_d": 3e-5, "loss_scale_g": 1.0, "skipped_d_total": 30, "skipped_g_total": 0}
    found = FaultMonitor(uses_loss_scaling=True).check(record, 30, 30)
    assert "inf or NaN at any scale, even unscaled" in found and "ampgan preflight" in found
    assert "learning rate" not in found


def test_a_non_persistent_buffer_the_step_changes_is_named_as_lost_on_resume(models):
    """ADA's running sign statistic kept with register_buffer(..., persistent=False): no checkpoint holds it, a
    resumed run restarted it from zero and trained on other augmentations than the uninterrupted run (52 of 79
    tensors differed at step 200), and preflight said nothing. A constant non-persistent buffer is not state."""
    said = _findings(models, "non_persistent_state")[("warning", "not-saved")]
    assert said.startswith("the step changes non-persistent buffers (D.seen): no checkpoint holds them")
    assert "kernel" not in said
    assert _findings(models, "non_persistent_state", ["model.persistent=true"]) == {}
