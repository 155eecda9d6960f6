"""HiFi-GAN (Kong et al. 2020) as NVIDIA DeepLearningExamples trains it (PyTorch/SpeechSynthesis/HiFiGAN at
729963dd: hifigan/models.py, train.py, hifigan/data_function.py), written from the paper and that recipe for
the projection; built on the meta device, never trained.

Why it is in the validation set: its generator update backpropagates through both discriminators into the
1-channel waveform (MPD's first convolution is a 2-D one with in_channels=1 on the waveform folded by its
period, MSD's a 1-D one with in_channels=1), so every step runs the 1-4 channel data gradient at scale, the
kernel class DeepBench never timed (a first layer needs no input gradient).
"""

from __future__ import annotations

import warnings

import torch
from torch import nn
from torch.nn.utils import spectral_norm

from .autocast import autocast_disabled, region

F = nn.functional
SLOPE = 0.1  # LRELU_SLOPE
SEGMENT = 8192  # --segment_size: audio samples per training example
HOP, FFT, MELS = 256, 1024, 80  # --hop_length, --filter_length (= --win_length), --num_mels
FRAMES = SEGMENT // HOP  # 32 mel frames in (the generator's input per example)
DLE_GLOBAL_BATCH = 128  # train_benchmark.sh: gradient accumulation = 128 / (batch x GPUs)


def weight_norm(module: nn.Module) -> nn.Module:
    """torch.nn.utils.weight_norm, as DLE uses it (the deprecated hook: the same weight recomputed each forward)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return nn.utils.weight_norm(module)


def _padding(kernel: int, dilation: int = 1) -> int:
    return (kernel * dilation - dilation) // 2


class ResBlock1(nn.Module):
    """Three pairs of `kernel`-wide convolutions, the first of each dilated 1, 3, 5, each pair a residual."""

    def __init__(self, channels: int, kernel: int, dilations=(1, 3, 5)):
        super().__init__()

        def conv(d):
            return weight_norm(nn.Conv1d(channels, channels, kernel, 1, _padding(kernel, d), d))

        self.convs1 = nn.ModuleList(conv(d) for d in dilations)
        self.convs2 = nn.ModuleList(conv(1) for _ in dilations)

    def forward(self, x):
        for c1, c2 in zip(self.convs1, self.convs2):
            x = x + c2(F.leaky_relu(c1(F.leaky_relu(x, SLOPE)), SLOPE))
        return x


class Generator(nn.Module):
    """The v1 generator: 80 mels -> 512 channels (7 wide), four transposed convolutions upsampling 8, 8, 2, 2
    (kernels 16, 16, 4, 4; channels halving to 32), after each the mean of three ResBlock1 (kernels 11, 7, 3),
    then 32 -> 1 channel (7 wide) and tanh: (B, 80, 32) -> (B, 1, 8192). Weight-normalised throughout."""

    def __init__(self, rates=(8, 8, 2, 2), kernels=(16, 16, 4, 4), initial: int = 512, blocks=(11, 7, 3)):
        super().__init__()
        self.conv_pre = weight_norm(nn.Conv1d(MELS, initial, 7, 1, padding=3))
        self.ups, self.resblocks = nn.ModuleList(), nn.ModuleList()
        for i, (rate, kernel) in enumerate(zip(rates, kernels)):
            cin, cout = initial // 2**i, initial // 2 ** (i + 1)
            self.ups.append(weight_norm(nn.ConvTranspose1d(cin, cout, kernel, rate, padding=(kernel - rate) // 2)))
            self.resblocks.append(nn.ModuleList(ResBlock1(cout, k) for k in blocks))
        self.conv_post = weight_norm(nn.Conv1d(cout, 1, 7, 1, padding=3))

    def forward(self, x):
        x = self.conv_pre(x)
        for up, group in zip(self.ups, self.resblocks):
            x = up(F.leaky_relu(x, SLOPE))
            xs = 0
            for block in group:
                xs = xs + block(x)
            x = xs / len(group)
        return torch.tanh(self.conv_post(F.leaky_relu(x)))  # leaky_relu's default slope here, as DLE has it


def _scores_and_features(convs: nn.ModuleList, post: nn.Module, x: torch.Tensor):
    """A HiFi-GAN discriminator's body: leaky ReLU after each convolution, every activation kept for the
    feature-matching loss, the last layer's output flattened as the scores."""
    fmap = []
    for conv in convs:
        x = F.leaky_relu(conv(x), SLOPE)
        fmap.append(x)
    x = post(x)
    fmap.append(x)
    return torch.flatten(x, 1, -1), fmap


class PeriodDiscriminator(nn.Module):
    """The waveform reflect-padded to a multiple of `period` and folded to (B, 1, T / period, period); five
    (5, 1) convolutions 1 -> 32 -> 128 -> 512 -> 1024 -> 1024 (stride 3 but the last) and a (3, 1) one to 1."""

    def __init__(self, period: int):
        super().__init__()
        self.period = period
        channels = (1, 32, 128, 512, 1024)
        self.convs = nn.ModuleList(
            weight_norm(nn.Conv2d(a, b, (5, 1), (3, 1), (2, 0))) for a, b in zip(channels, channels[1:])
        )
        self.convs.append(weight_norm(nn.Conv2d(1024, 1024, (5, 1), 1, (2, 0))))
        self.conv_post = weight_norm(nn.Conv2d(1024, 1, (3, 1), 1, (1, 0)))

    def forward(self, x):
        b, c, t = x.shape
        if t % self.period:
            x = F.pad(x, (0, self.period - t % self.period), "reflect")
        x = x.view(b, c, -1, self.period)
        return _scores_and_features(self.convs, self.conv_post, x)


class FloatConv1d(nn.Conv1d):
    """DLE's NoAMPConv1d: with --no_amp_grouped_conv (its A100 mixed-precision runs) the convolution runs in
    fp32 with autocast off, its input cast up and its output back."""

    def __init__(self, *args, fp32: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.fp32 = fp32

    def forward(self, x):
        if not self.fp32:
            return super().forward(x)
        with autocast_disabled():
            return super().forward(x.float()).to(x.dtype)


class ScaleDiscriminator(nn.Module):
    """Eight 1-D convolutions 1 -> 128 -> 128 -> 256 -> 512 -> 1024 -> 1024 -> 1024 -> 1 (15, 41 x 5, 5, 3
    wide; the 41-wide ones grouped 4 and 16, strided 2, 2, 4, 4, 1)."""

    def __init__(self, spectral: bool = False, fp32_grouped: bool = False):
        super().__init__()
        norm = spectral_norm if spectral else weight_norm

        def grouped(cin, cout, stride, groups):
            return norm(FloatConv1d(cin, cout, 41, stride, groups=groups, padding=20, fp32=fp32_grouped))

        self.convs = nn.ModuleList(
            [
                norm(nn.Conv1d(1, 128, 15, 1, padding=7)),
                norm(nn.Conv1d(128, 128, 41, 2, groups=4, padding=20)),
                grouped(128, 256, 2, 16),
                grouped(256, 512, 4, 16),
                grouped(512, 1024, 4, 16),
                grouped(1024, 1024, 1, 16),
                norm(nn.Conv1d(1024, 1024, 5, 1, padding=2)),
            ]
        )
        self.conv_post = norm(nn.Conv1d(1024, 1, 3, 1, padding=1))

    def forward(self, x):
        return _scores_and_features(self.convs, self.conv_post, x)


class MultiPeriod(nn.Module):
    def __init__(self, periods=(2, 3, 5, 7, 11)):
        super().__init__()
        self.discriminators = nn.ModuleList(PeriodDiscriminator(p) for p in periods)

    def forward(self, real, fake):
        """([real logits], [fake logits], [real feature maps], [fake feature maps]), each input run alone (DLE's
        default: --concat_fwd off)."""
        out = [d(real) + d(fake) for d in self.discriminators]
        return [o[0] for o in out], [o[2] for o in out], [o[1] for o in out], [o[3] for o in out]


class MultiScale(nn.Module):
    """Three scale discriminators (the first spectrally normalised) on the waveform average-pooled 0, 1 and 2
    times (4 wide, stride 2)."""

    def __init__(self, fp32_grouped: bool = False):
        super().__init__()
        self.discriminators = nn.ModuleList(
            ScaleDiscriminator(spectral=i == 0, fp32_grouped=fp32_grouped) for i in range(3)
        )

    def forward(self, real, fake):
        out = []
        for i, d in enumerate(self.discriminators):
            if i:
                real, fake = F.avg_pool1d(real, 4, 2, padding=1), F.avg_pool1d(fake, 4, 2, padding=1)
            out.append(d(real) + d(fake))
        return [o[0] for o in out], [o[2] for o in out], [o[1] for o in out], [o[3] for o in out]


class HiFiGAN(nn.Module):
    """The generator and both discriminators, and LJSpeech's mel filterbank and window (buffers)."""

    def __init__(self, fp32_grouped: bool = False):
        super().__init__()
        self.generator = Generator()
        self.mpd = MultiPeriod()
        self.msd = MultiScale(fp32_grouped)
        # librosa's mel filterbank (80 x 513) and a Hann window: their values do not change the cost
        self.register_buffer("mel_basis", torch.zeros(MELS, FFT // 2 + 1))
        self.register_buffer("window", torch.zeros(FFT))

    def mel(self, audio):
        """hifigan/data_function.mel_spectrogram of (B, 8192) fp32 audio: (B, 80, 32) log mels. Outside
        autocast (train.py's --autocast_spectrogram is off). The FFT is not a matrix op to the tracer: it
        is costed by its bytes, as memory-bound work (a 1024-point FFT does ~5 flops a byte)."""
        with autocast_disabled():
            # train.py checks the range of every generated batch (two reductions and a host sync each)
            torch.min(audio), torch.max(audio)
            pad = (FFT - HOP) // 2
            audio = F.pad(audio.unsqueeze(1), (pad, pad), mode="reflect").squeeze(1)
            spec = torch.stft(audio, FFT, HOP, FFT, self.window, center=False, return_complex=True)
            spec = torch.sqrt(torch.view_as_real(spec).pow(2).sum(-1) + 1e-9)
            return torch.log(torch.clamp(torch.matmul(self.mel_basis, spec), min=1e-5))


def _discriminator_loss(real, fake):
    return sum(torch.mean((1 - r) ** 2) + torch.mean(g**2) for r, g in zip(real, fake))


def _feature_loss(real_maps, fake_maps):
    return 2 * sum(torch.mean(torch.abs(r - g)) for rs, gs in zip(real_maps, fake_maps) for r, g in zip(rs, gs))


def _set_trainable(module: nn.Module, on: bool) -> None:
    for p in module.parameters():
        p.requires_grad_(on)


def hifigan_step(model: HiFiGAN, batch: tuple, accumulation: int = 1) -> torch.Tensor:
    """One optimizer step of train.py as its forwards, with every micro-batch's losses summed for one
    backward pass (the same kernels as its backward calls: the graphs are disjoint). `accumulation`
    micro-batches: the discriminators' pass runs the generator on each (with gradients only on the last),
    the generator's pass runs it again on all but that last one, whose output it reuses; during it the
    discriminators are frozen (common/utils.freeze), so their weight gradients are not computed."""
    mels, audio, target = batch  # (B, 80, 32), (B, 1, 8192), (B, 80, 32)
    losses, fakes = [], []
    # each `with region()`: one of train.py's autocast blocks (a weight is cast once per block)
    for i in range(accumulation):
        with torch.set_grad_enabled(i == accumulation - 1), region():
            fakes.append(model.generator(mels))
        with region():
            for d in (model.mpd, model.msd):
                real, fake, _, _ = d(audio, fakes[-1].detach())
                losses.append(_discriminator_loss(real, fake) / accumulation)
    _set_trainable(model.mpd, False)
    _set_trainable(model.msd, False)
    for i in range(accumulation):
        with region():
            fake = fakes[-1] if i == 0 else model.generator(mels)
        loss = F.l1_loss(target, model.mel(fake.float().squeeze(1))) * 45
        with region():
            for d in (model.mpd, model.msd):
                _, fake_logits, real_maps, fake_maps = d(audio, fake)
                loss = loss + _feature_loss(real_maps, fake_maps) + sum(torch.mean((1 - g) ** 2) for g in fake_logits)
        losses.append(loss / accumulation)
    _set_trainable(model.mpd, True)  # after the forwards: the graph already holds which weights need gradients
    _set_trainable(model.msd, True)
    return sum(losses)
