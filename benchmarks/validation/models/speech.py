"""Tacotron 2 and WaveGlow as NVIDIA DeepLearningExamples train them (PyTorch/SpeechSynthesis/Tacotron2),
written from their papers and the README's hyperparameters; built on the meta device for the projection,
never trained."""

from __future__ import annotations

import torch
from torch import nn

from . import rnn

F = nn.functional


def _conv_bn(cin: int, cout: int, kernel: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv1d(cin, cout, kernel, padding=kernel // 2), nn.BatchNorm1d(cout))


class Tacotron2(nn.Module):
    """148 symbols embedded 512 wide, three 5-wide convolutions and a bidirectional LSTM (256 each way);
    a decoder stepped once per mel frame (one frame per step, as DLE trains it): a 256-256 prenet, a
    1024-wide attention LSTM cell, location-sensitive attention (32 filters 31 wide, 128-wide energies),
    a 1024-wide decoder LSTM cell, the 80-bin frame and stop-token projections; a 5-layer 512-wide postnet."""

    def __init__(self, symbols: int = 148, mels: int = 80):
        super().__init__()
        self.mels = mels
        self.embedding = nn.Embedding(symbols, 512)
        self.convolutions = nn.ModuleList(_conv_bn(512, 512, 5) for _ in range(3))
        self.encoder = rnn.CudnnLSTM(512, 256, batch_first=True, bidirectional=True)
        self.prenet = nn.ModuleList([nn.Linear(mels, 256, bias=False), nn.Linear(256, 256, bias=False)])
        self.attention_rnn = rnn.CudaLSTMCell(256 + 512, 1024)
        self.query, self.memory = nn.Linear(1024, 128, bias=False), nn.Linear(512, 128, bias=False)
        self.location_conv = nn.Conv1d(2, 32, 31, padding=15, bias=False)
        self.location_dense = nn.Linear(32, 128, bias=False)
        self.energy = nn.Linear(128, 1, bias=False)
        self.decoder_rnn = rnn.CudaLSTMCell(1024 + 512, 1024)
        self.projection, self.gate = nn.Linear(1024 + 512, mels), nn.Linear(1024 + 512, 1)
        channels = [mels, 512, 512, 512, 512, mels]
        self.postnet = nn.ModuleList(_conv_bn(a, b, 5) for a, b in zip(channels[:-1], channels[1:]))

    def forward(self, text, mels):
        batch, frames = mels.shape[0], mels.shape[2]
        x = self.embedding(text).transpose(1, 2)
        for conv in self.convolutions:
            x = F.dropout(F.relu(conv(x)), 0.5, self.training)
        memory, _ = self.encoder(x.transpose(1, 2))  # (B, T_in, 512)
        keys = self.memory(memory)  # (B, T_in, 128)
        length = memory.shape[1]
        h_att = c_att = h_dec = c_dec = torch.zeros(batch, 1024, device=mels.device, dtype=memory.dtype)
        weights = cumulative = torch.zeros(batch, length, device=mels.device, dtype=memory.dtype)
        context = torch.zeros(batch, 512, device=mels.device, dtype=memory.dtype)
        previous = torch.zeros(batch, self.mels, device=mels.device, dtype=mels.dtype)
        outputs, gates = [], []
        for t in range(frames):
            p = previous
            for layer in self.prenet:
                p = F.dropout(F.relu(layer(p)), 0.5, True)
            h_att, c_att = self.attention_rnn(torch.cat([p, context], -1), (h_att, c_att))
            location = self.location_dense(self.location_conv(torch.stack([weights, cumulative], 1)).transpose(1, 2))
            energies = self.energy(torch.tanh(self.query(h_att)[:, None] + location + keys)).squeeze(-1)
            weights = F.softmax(energies, dim=1)
            cumulative = cumulative + weights
            context = torch.bmm(weights[:, None], memory).squeeze(1)
            h_dec, c_dec = self.decoder_rnn(torch.cat([h_att, context], -1), (h_dec, c_dec))
            both = torch.cat([h_dec, context], -1)
            outputs.append(self.projection(both))
            gates.append(self.gate(both))
            previous = mels[:, :, t]  # teacher forcing
        mel = torch.stack(outputs, 2)  # (B, 80, T_out)
        post = mel
        for i, conv in enumerate(self.postnet):
            post = conv(post)
            post = F.dropout(torch.tanh(post) if i < 4 else post, 0.5, self.training)
        return mel, mel + post, torch.cat(gates, 1)


def tacotron2_loss(mel, postnet_mel, gate, target_mel, target_gate):
    return (
        F.mse_loss(mel, target_mel)
        + F.mse_loss(postnet_mel, target_mel)
        + F.binary_cross_entropy_with_logits(gate, target_gate)
    )


class WN(nn.Module):
    """WaveGlow's WaveNet-like coupling network: 8 layers of 3-wide dilated convolutions (dilation 1..128),
    a gated tanh-sigmoid on each, conditioned on the upsampled mels by 1x1 convolutions."""

    def __init__(self, half: int, conditioning: int, channels: int = 512, layers: int = 8):
        super().__init__()
        self.start = nn.Conv1d(half, channels, 1)
        self.inputs = nn.ModuleList(
            nn.Conv1d(channels, 2 * channels, 3, dilation=2**i, padding=2**i) for i in range(layers)
        )
        self.condition = nn.Conv1d(conditioning, 2 * channels * layers, 1)
        self.res_skip = nn.ModuleList(
            nn.Conv1d(channels, 2 * channels if i < layers - 1 else channels, 1) for i in range(layers)
        )
        self.end = nn.Conv1d(channels, 2 * half, 1)
        self.channels = channels

    def forward(self, audio, spect):
        x = self.start(audio)
        conditions = self.condition(spect).chunk(len(self.inputs), 1)
        output = 0
        for i, (layer, res_skip) in enumerate(zip(self.inputs, self.res_skip)):
            a, b = (layer(x) + conditions[i]).chunk(2, 1)
            acts = res_skip(torch.tanh(a) * torch.sigmoid(b))
            if i < len(self.inputs) - 1:
                x = x + acts[:, : self.channels]
                output = output + acts[:, self.channels :]
            else:
                output = output + acts
        return self.end(output)


class WaveGlow(nn.Module):
    """DLE's WaveGlow: 12 flows over groups of 8 samples, 2 channels out early every 4 flows, WN 8 layers of
    512 channels (the paper's and NVIDIA's config: n_channels 512), mels upsampled by a 1024-wide transposed
    convolution (stride 256). The invertible 1x1 convolution is a 1x1 convolution; its log-determinant (of a
    c x c matrix, at most 8 x 8) is left out."""

    def __init__(self, mels: int = 80, flows: int = 12, group: int = 8, early_every: int = 4, early_size: int = 2):
        super().__init__()
        self.upsample = nn.ConvTranspose1d(mels, mels, 1024, stride=256)
        self.group, self.early_every, self.early_size = group, early_every, early_size
        self.inverse_convs, self.wns = nn.ModuleList(), nn.ModuleList()
        remaining = group
        for k in range(flows):
            if k % early_every == 0 and k > 0:
                remaining -= early_size
            self.inverse_convs.append(nn.Conv1d(remaining, remaining, 1, bias=False))
            self.wns.append(WN(remaining // 2, mels * group))

    def forward(self, spect, audio):
        spect = self.upsample(spect)[:, :, : audio.shape[1]]  # (B, 80, samples)
        spect = spect.unfold(2, self.group, self.group).permute(0, 2, 1, 3)
        spect = spect.reshape(spect.shape[0], spect.shape[1], -1).permute(0, 2, 1)  # (B, 640, samples / 8)
        audio = audio.unfold(1, self.group, self.group).permute(0, 2, 1)  # (B, 8, samples / 8)
        outputs, log_s_total = [], 0
        for k, (conv, wn) in enumerate(zip(self.inverse_convs, self.wns)):
            if k % self.early_every == 0 and k > 0:
                outputs.append(audio[:, : self.early_size])
                audio = audio[:, self.early_size :]
            audio = conv(audio)
            half = audio.shape[1] // 2
            log_s, t = wn(audio[:, :half], spect).chunk(2, 1)
            audio = torch.cat([audio[:, :half], torch.exp(log_s) * audio[:, half:] + t], 1)
            log_s_total = log_s_total + log_s.sum()
        outputs.append(audio)
        return torch.cat(outputs, 1), log_s_total


def waveglow_loss(z, log_s_total, sigma: float = 1.0):
    return (torch.sum(z * z) / (2 * sigma * sigma) - log_s_total) / z.numel()
