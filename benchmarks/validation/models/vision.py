"""ResNet-50 and SSD300 as NVIDIA DeepLearningExamples train them (PyTorch/Classification/ConvNets/resnet50v1.5,
PyTorch/Detection/SSD), written from their papers and READMEs: layer counts, widths, strides and heads as
there; torchvision's VGG-16 as its vgg.py builds it; built on the meta device for the projection, never trained."""

from __future__ import annotations

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
