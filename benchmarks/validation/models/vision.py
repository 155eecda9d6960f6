"""ResNet-50, ResNeXt-101 32x4d, SE-ResNeXt-101 32x4d, EfficientNet-B0/B4 and SSD300 as NVIDIA
DeepLearningExamples train them (PyTorch/Classification/ConvNets, PyTorch/Detection/SSD), written from their
papers, READMEs and model code: layer counts, widths, strides and heads as there; torchvision's VGG-16 as its
vgg.py builds it; built on the meta device for the projection, never trained."""

from __future__ import annotations

import math

import torch
from torch import nn

F = nn.functional


class Bottleneck(nn.Module):
    """ResNet v1.5: the stride on the 3x3 convolution (DLE's resnet50v1.5)."""

    def __init__(self, inplanes: int, planes: int, stride: int):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(inplanes, planes, 1, bias=False), nn.BatchNorm2d(planes)
        self.conv2, self.bn2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes)
        self.conv3, self.bn3 = nn.Conv2d(planes, planes * 4, 1, bias=False), nn.BatchNorm2d(planes * 4)
        self.down = None
        if stride != 1 or inplanes != planes * 4:
            self.down = nn.Sequential(
                nn.Conv2d(inplanes, planes * 4, 1, stride, bias=False), nn.BatchNorm2d(planes * 4)
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.down is None else self.down(x)))


def _layer(inplanes: int, planes: int, blocks: int, stride: int) -> nn.Sequential:
    layers = [Bottleneck(inplanes, planes, stride)]
    layers += [Bottleneck(planes * 4, planes, 1) for _ in range(blocks - 1)]
    return nn.Sequential(*layers)


class ResNet50(nn.Module):
    def __init__(self, classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
        )
        self.layer1 = _layer(64, 64, 3, 1)  # (B, 256, 56, 56)
        self.layer2 = _layer(256, 128, 4, 2)  # (B, 512, 28, 28)
        self.layer3 = _layer(512, 256, 6, 2)  # (B, 1024, 14, 14)
        self.layer4 = _layer(1024, 512, 3, 2)  # (B, 2048, 7, 7)
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        x = self.layer4(self.layer3(self.layer2(self.layer1(self.stem(x)))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class VGG16(nn.Module):
    """torchvision's vgg16 (configuration D, no batch norm): thirteen 3x3 convolutions in five blocks, each
    block ending in a 2x2 max pool, then 25088 -> 4096 -> 4096 -> classes with ReLU and dropout."""

    WIDTHS = ((64, 64), (128, 128), (256, 256, 256), (512, 512, 512), (512, 512, 512))

    def __init__(self, classes: int = 1000):
        super().__init__()
        layers, channels = [], 3
        for block in self.WIDTHS:
            for width in block:
                layers += [nn.Conv2d(channels, width, 3, padding=1), nn.ReLU(inplace=True)]
                channels = width
            layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)  # (B, 512, 7, 7) at 224x224
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(True),
            nn.Dropout(),
            nn.Linear(4096, 4096),
            nn.ReLU(True),
            nn.Dropout(),
            nn.Linear(4096, classes),
        )

    def forward(self, x):
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 7), 1))


class SSD300(nn.Module):
    """DLE's SSD300 v1.1: ResNet-50 to layer3 with layer3's stride set to 1 (38x38, 1024 channels), five
    extra blocks (1x1 then 3x3 convolutions) to 19, 10, 5, 3, 1, and a 3x3 location and a 3x3 class head on
    each of the six maps: 4, 6, 6, 6, 4, 4 default boxes per cell, 8732 in all, 81 COCO classes."""

    CHANNELS = (1024, 512, 512, 256, 256, 256)
    MIDDLE = (256, 256, 128, 128, 128)
    BOXES = (4, 6, 6, 6, 4, 4)

    def __init__(self, classes: int = 81):
        super().__init__()
        resnet = ResNet50()
        resnet.layer3[0].conv2.stride = (1, 1)
        resnet.layer3[0].down[0].stride = (1, 1)
        self.feature = nn.Sequential(resnet.stem, resnet.layer1, resnet.layer2, resnet.layer3)
        extra = []
        for i, (cin, mid, cout) in enumerate(zip(self.CHANNELS[:-1], self.MIDDLE, self.CHANNELS[1:])):
            stride, pad = (2, 1) if i < 3 else (1, 0)
            extra.append(
                nn.Sequential(
                    nn.Conv2d(cin, mid, 1, bias=False),
                    nn.BatchNorm2d(mid),
                    nn.ReLU(),
                    nn.Conv2d(mid, cout, 3, stride, pad, bias=False),
                    nn.BatchNorm2d(cout),
                    nn.ReLU(),
                )
            )
        self.extra = nn.ModuleList(extra)
        self.loc = nn.ModuleList(nn.Conv2d(c, b * 4, 3, padding=1) for c, b in zip(self.CHANNELS, self.BOXES))
        self.conf = nn.ModuleList(nn.Conv2d(c, b * classes, 3, padding=1) for c, b in zip(self.CHANNELS, self.BOXES))
        self.classes = classes

    def forward(self, x):
        maps = [self.feature(x)]
        for block in self.extra:
            maps.append(block(maps[-1]))
        batch = x.shape[0]
        locs = torch.cat([head(m).reshape(batch, 4, -1) for head, m in zip(self.loc, maps)], 2)
        confs = torch.cat([head(m).reshape(batch, self.classes, -1) for head, m in zip(self.conf, maps)], 2)
        return locs, confs  # (B, 4, 8732), (B, 81, 8732)


def ssd_loss(locs, confs, boxes, labels):
    """DLE's SSD loss: smooth L1 on the matched boxes' offsets, cross entropy with hard negative mining
    (the negatives ranked by their loss: a sort over the 8732 boxes of each image, as DLE's Loss does)."""
    positive = (labels > 0).to(locs.dtype)
    location = (F.smooth_l1_loss(locs, boxes, reduction="none").sum(1) * positive).sum(1)
    confidence = F.cross_entropy(confs, labels, reduction="none")  # (B, 8732)
    negative = confidence.clone()
    _, order = negative.sort(dim=1, descending=True)
    _, rank = order.sort(dim=1)
    hard = (rank < 3 * positive.sum(1, keepdim=True)).to(locs.dtype)
    return (location + (confidence * (positive + hard)).sum(1)).mean()


class GroupedBottleneck(nn.Module):
    """DLE ConvNets' Bottleneck as ResNeXt and SE-ResNeXt use it (image_classification/models/resnet.py):
    1x1 to `width`, a 3x3 in `groups` groups carrying the stride, 1x1 to width x expansion; with `squeeze`, the
    squeeze-and-excitation of common.py (a mean over the map, Linear to `squeeze` units, ReLU, Linear back,
    sigmoid) applied as its fused form does, addcmul(residual, out, attention)."""

    def __init__(self, inplanes: int, width: int, stride: int, expansion: int, groups: int, squeeze: int = 0):
        super().__init__()
        out = width * expansion
        self.conv1, self.bn1 = nn.Conv2d(inplanes, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, out, 1, bias=False), nn.BatchNorm2d(out)
        self.down = None
        if stride != 1 or inplanes != out:
            self.down = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride, bias=False), nn.BatchNorm2d(out))
        self.squeeze = nn.Sequential(nn.Linear(out, squeeze), nn.ReLU(), nn.Linear(squeeze, out)) if squeeze else None

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        residual = x if self.down is None else self.down(x)
        if self.squeeze is None:
            return F.relu(out + residual)
        attention = torch.sigmoid(self.squeeze(out.mean((2, 3))))[:, :, None, None]
        return F.relu(torch.addcmul(residual, out, attention))


class ResNeXt101(nn.Module):
    """DLE's resnext101-32x4d, and with `squeeze` its se-resnext101-32x4d (SE of 16 units in every block):
    blocks 3, 4, 23, 3 of widths 128, 256, 512, 1024 in 32 groups, expansion 2, the ResNet-50 stem and head."""

    def __init__(self, squeeze: int = 0, classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
        )
        blocks, inplanes = [], 64
        for stage, (count, width) in enumerate(zip((3, 4, 23, 3), (128, 256, 512, 1024))):
            for i in range(count):
                stride = 2 if stage > 0 and i == 0 else 1
                blocks.append(GroupedBottleneck(inplanes, width, stride, 2, 32, squeeze))
                inplanes = width * 2
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(inplanes, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def _scaled_width(channels: int, coefficient: float, divisor: int = 8) -> int:
    """DLE EffNetArch._scale_width: channels x the width coefficient, to a multiple of 8 (never 10% below)."""
    scaled = channels * coefficient
    rounded = max(divisor, int(scaled + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * scaled else rounded


class MBConv(nn.Module):
    """DLE's MBConvBlock (original_mbconv): 1x1 expansion (none at ratio 1), a depthwise k x k carrying the
    stride, squeeze-and-excitation on the block's input width x 0.25 with SiLU, 1x1 projection; a residual
    where shapes allow, through StochasticDepthResidual (a dropped-out scalar mask, addcmul) below survival 1."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expand: int, survival: float):
        super().__init__()
        hidden = cin * expand
        self.expand = None
        if expand != 1:
            self.expand = nn.Sequential(nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.SiLU())
        self.depthwise = nn.Sequential(
            nn.Conv2d(hidden, hidden, kernel, stride, kernel // 2, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.SiLU(),
        )
        squeeze = max(1, int(cin * 0.25))
        self.squeeze = nn.Sequential(nn.Linear(hidden, squeeze), nn.SiLU(), nn.Linear(squeeze, hidden))
        self.project = nn.Sequential(nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout
        self.survival = survival

    def forward(self, x):
        out = self.depthwise(x if self.expand is None else self.expand(x))
        out = self.project(out * torch.sigmoid(self.squeeze(out.mean((2, 3))))[:, :, None, None])
        if not self.residual:
            return out
        if self.survival == 1.0:
            return x + out
        with torch.no_grad():
            mask = F.dropout(torch.ones((), device=x.device), p=1 - self.survival, training=self.training)
        return torch.addcmul(x, mask, out)


class EfficientNet(nn.Module):
    """DLE's efficientnet-b0 and -b4 (image_classification/models/efficientnet.py): B0's seven stages scaled in
    width and depth (B4: 1.4 and 1.8, dropout 0.4, survival 0.8 falling linearly with the block's index; B0:
    survival 1), stem 3x3/2 to 32, head 1x1 to 1280 (both scaled), average pool, dropout, fc."""

    KERNEL = (3, 3, 5, 3, 5, 5, 3)
    STRIDE = (1, 2, 2, 2, 1, 2, 1)
    REPEAT = (1, 2, 2, 3, 3, 4, 1)
    EXPAND = (1, 6, 6, 6, 6, 6, 6)
    CHANNELS = (16, 24, 40, 80, 112, 192, 320)

    def __init__(self, width: float, depth: float, dropout: float, survival: float, classes: int = 1000):
        super().__init__()
        stem = _scaled_width(32, width)
        self.stem = nn.Sequential(nn.Conv2d(3, stem, 3, 2, 1, bias=False), nn.BatchNorm2d(stem), nn.SiLU())
        repeats = [int(math.ceil(r * depth)) for r in self.REPEAT]
        total, blocks, cin = sum(repeats), [], stem
        stages = zip(self.KERNEL, self.STRIDE, repeats, self.EXPAND, self.CHANNELS)
        for kernel, stride, repeat, expand, channels in stages:
            cout = _scaled_width(channels, width)
            for i in range(repeat):
                keep = 1.0 - (1.0 - survival) * len(blocks) / total
                blocks.append(MBConv(cin, cout, kernel, stride if i == 0 else 1, expand, keep))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        head = _scaled_width(1280, width)
        self.head = nn.Sequential(nn.Conv2d(cin, head, 1, bias=False), nn.BatchNorm2d(head), nn.SiLU())
        self.dropout, self.fc = nn.Dropout(dropout), nn.Linear(head, classes)

    def forward(self, x):
        x = self.head(self.blocks(self.stem(x)))
        return self.fc(self.dropout(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)))
