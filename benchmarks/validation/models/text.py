"""BERT (SQuAD fine-tuning), Transformer-XL, GNMT and NCF as NVIDIA DeepLearningExamples train them
(PyTorch/LanguageModeling/BERT and Transformer-XL, PyTorch/Translation/GNMT, PyTorch/Recommendation/NCF),
written from their papers and READMEs: layers, widths, heads, vocabularies and sequence lengths as there;
built on the meta device for the projection, never trained."""

from __future__ import annotations

import math

import torch
from torch import nn

from . import rnn

F = nn.functional


class SelfAttention(nn.Module):
    """Attention as DLE's BERT writes it: one product for the scores, softmax, one for the context."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads, self.size = heads, hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x, keys=None):
        batch, length, hidden = x.shape
        q, k, v = self.qkv(x).split(hidden, dim=2)

        def heads(t):  # (B, L, H) -> (B x heads, L, size)
            return (
                t.reshape(batch, -1, self.heads, self.size).transpose(1, 2).reshape(batch * self.heads, -1, self.size)
            )

        scores = torch.bmm(heads(q), heads(k).transpose(1, 2)) / math.sqrt(self.size)
        probs = self.dropout(F.softmax(scores, dim=-1))
        context = torch.bmm(probs, heads(v)).reshape(batch, self.heads, length, self.size).transpose(1, 2)
        return self.out(context.reshape(batch, length, hidden))


class EncoderLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, inner: int):
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.ff1, self.ff2 = nn.Linear(hidden, inner), nn.Linear(inner, hidden)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        x = self.norm1(x + self.dropout(self.attention(x)))
        return self.norm2(x + self.dropout(self.ff2(F.gelu(self.ff1(x)))))


class BertForQuestionAnswering(nn.Module):
    """BERT base (12 layers, 768 wide, 12 heads, 3072 inner) or large (24, 1024, 16, 4096); DLE's vocabulary
    of 30522 padded to 30528; a start/end head on every token."""

    def __init__(self, layers: int, hidden: int, heads: int, vocab: int = 30528, positions: int = 512):
        super().__init__()
        self.words, self.positions = nn.Embedding(vocab, hidden), nn.Embedding(positions, hidden)
        self.types = nn.Embedding(2, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, 4 * hidden) for _ in range(layers))
        self.qa = nn.Linear(hidden, 2)

    def forward(self, tokens, segments):
        start, end = self.qa(self.encode(tokens, segments)).unbind(-1)  # (B, L) each
        return start, end

    def encode(self, tokens, segments):  # (B, L) ids -> (B, L, hidden)
        positions = torch.arange(tokens.shape[1], device=tokens.device)[None]
        x = self.norm(self.words(tokens) + self.positions(positions) + self.types(segments))
        for layer in self.layers:
            x = layer(x)
        return x


class BertForSequenceClassification(BertForQuestionAnswering):
    """Hugging Face's BertForSequenceClassification: the same encoder (its vocabulary of 30522), then a tanh
    pooler on the first token and a linear layer to the labels, in place of the start/end head."""

    def __init__(self, layers: int, hidden: int, heads: int, labels: int = 2):
        super().__init__(layers, hidden, heads, vocab=30522)
        del self.qa
        self.pooler, self.classifier = nn.Linear(hidden, hidden), nn.Linear(hidden, labels)

    def forward(self, tokens, segments):
        first = self.encode(tokens, segments)[:, 0]  # (B, hidden)
        return self.classifier(torch.tanh(self.pooler(first)))  # (B, labels)


class RelativeAttentionLayer(nn.Module):
    """Transformer-XL's layer: queries over the segment, keys over memory and segment, the content term and
    the relative-position term each one batched product (the position term over a projection of the
    relative encodings, then shifted: a copy), softmax, context; then the position-wise feed-forward."""

    def __init__(self, d_model: int, heads: int, d_head: int, inner: int):
        super().__init__()
        self.heads, self.d_head = heads, d_head
        self.qkv = nn.Linear(d_model, 3 * heads * d_head, bias=False)
        self.r_net = nn.Linear(d_model, heads * d_head, bias=False)
        self.out = nn.Linear(heads * d_head, d_model, bias=False)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.ff1, self.ff2 = nn.Linear(d_model, inner), nn.Linear(inner, d_model)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x, memory, positions):
        batch, length, _ = x.shape
        keys_in = torch.cat([memory, x], 1)  # (B, M + L, d)
        total = keys_in.shape[1]
        heads = self.qkv(keys_in).reshape(batch, total, 3, self.heads, self.d_head)
        q = heads[:, -length:, 0].transpose(1, 2).reshape(batch * self.heads, length, self.d_head)
        k = heads[:, :, 1].transpose(1, 2).reshape(batch * self.heads, total, self.d_head)
        v = heads[:, :, 2].transpose(1, 2).reshape(batch * self.heads, total, self.d_head)
        r = self.r_net(positions).reshape(total, self.heads, self.d_head).transpose(0, 1)  # (heads, M + L, d_head)
        content = torch.bmm(q, k.transpose(1, 2))
        position = torch.matmul(q.reshape(batch, self.heads, length, self.d_head), r.transpose(1, 2)[None])
        position = position.reshape(batch * self.heads, length, total).contiguous()  # the relative shift's copy
        probs = self.dropout(F.softmax((content + position) / math.sqrt(self.d_head), dim=-1))
        context = torch.bmm(probs, v).reshape(batch, self.heads, length, self.d_head).transpose(1, 2)
        x = self.norm1(x + self.dropout(self.out(context.reshape(batch, length, -1))))
        return self.norm2(x + self.dropout(self.ff2(self.dropout(F.relu(self.ff1(x))))))


class AdaptiveSoftmax(nn.Module):
    """Transformer-XL's projected adaptive softmax on WikiText-103 (267735 words, clusters cut at 19997,
    39997, 199997). Its tail clusters run only on the tokens whose word falls in them, which depends on the
    data; here each tail runs on a fixed share of the tokens (5%, 4%, 1%: the head's 20000 most frequent
    words cover about 90% of WikiText-103's tokens) so that its FLOPs are the expected ones. `div_val`:
    each cluster's width divided by it (1: every cluster d_model wide; 4: 1024, 256, 64, 16)."""

    CUTOFFS = (19997, 39997, 199997, 267735)
    SHARES = (0.05, 0.04, 0.01)

    def __init__(self, d_model: int, div_val: int):
        super().__init__()
        starts = (0, *self.CUTOFFS[:-1])
        widths = [d_model // div_val**i for i in range(len(self.CUTOFFS))]
        self.head = nn.Linear(widths[0], self.CUTOFFS[0] + 3)
        self.head_projection = nn.Linear(d_model, widths[0], bias=False) if div_val > 1 else nn.Identity()
        self.tails = nn.ModuleList(
            nn.Linear(w, end - start) for w, start, end in zip(widths[1:], starts[1:], self.CUTOFFS[1:])
        )
        self.projections = nn.ModuleList(nn.Linear(d_model, w, bias=False) for w in widths[1:])

    def forward(self, hidden, targets):
        tokens = hidden.reshape(-1, hidden.shape[-1])
        targets = targets.reshape(-1)
        loss = F.cross_entropy(self.head(self.head_projection(tokens)), targets.clamp(max=self.CUTOFFS[0] + 2))
        for share, tail, projection in zip(self.SHARES, self.tails, self.projections):
            picked = max(1, round(len(tokens) * share))
            logits = tail(projection(tokens[:picked]))
            loss = loss + F.cross_entropy(logits, targets[:picked].clamp(max=logits.shape[1] - 1)) * share
        return loss


class TransformerXL(nn.Module):
    """DLE's Transformer-XL on WikiText-103: base (16 layers, d_model 512, 8 heads of 64, inner 2048,
    segment and memory 192, div_val 1) or large (18, 1024, 16 heads of 64, 4096, 384 and 384, div_val 4),
    its embedding the adaptive input (one table per cluster, projected to d_model)."""

    def __init__(self, layers: int, d_model: int, heads: int, inner: int, div_val: int):
        super().__init__()
        self.d_model = d_model
        widths = [d_model // div_val**i for i in range(4)]
        starts = (0, *AdaptiveSoftmax.CUTOFFS[:-1])
        self.embeddings = nn.ModuleList(
            nn.Embedding(end - start, w) for w, start, end in zip(widths, starts, AdaptiveSoftmax.CUTOFFS)
        )
        self.embedding_projections = nn.ModuleList(nn.Linear(w, d_model, bias=False) for w in widths)
        self.layers = nn.ModuleList(RelativeAttentionLayer(d_model, heads, 64, inner) for _ in range(layers))
        self.softmax = AdaptiveSoftmax(d_model, div_val)

    def forward(self, tokens, targets, memory_length: int):
        batch, length = tokens.shape
        # The adaptive input: every token looked up in the head table (the others' lookups are a few percent).
        x = self.embedding_projections[0](self.embeddings[0](tokens.clamp(max=AdaptiveSoftmax.CUTOFFS[0] - 1)))
        positions = torch.zeros(memory_length + length, self.d_model, device=tokens.device, dtype=x.dtype)
        for layer in self.layers:
            memory = torch.zeros(batch, memory_length, self.d_model, device=tokens.device, dtype=x.dtype)
            x = layer(x, memory, positions)
        return self.softmax(x, targets)


class GNMT(nn.Module):
    """DLE's GNMT v2: a 32320-word shared vocabulary, 1024-wide LSTMs; the encoder one bidirectional layer
    and three unidirectional (residual from the third), the decoder four layers, the first feeding a
    normalised Bahdanau attention whose context joins every later layer's input; label-smoothed loss."""

    def __init__(self, vocab: int = 32320, hidden: int = 1024):
        super().__init__()
        self.embed_source, self.embed_target = nn.Embedding(vocab, hidden), nn.Embedding(vocab, hidden)
        self.bidirectional = rnn.CudnnLSTM(hidden, hidden, batch_first=True, bidirectional=True)  # (B, S, 2048)
        self.encoder = nn.ModuleList(
            rnn.CudnnLSTM(2 * hidden if i == 0 else hidden, hidden, batch_first=True) for i in range(3)
        )
        self.decoder_first = rnn.CudnnLSTM(hidden, hidden, batch_first=True)
        self.query, self.keys = nn.Linear(hidden, hidden, bias=False), nn.Linear(hidden, hidden, bias=False)
        self.energy = nn.Linear(hidden, 1, bias=False)
        self.decoder = nn.ModuleList(rnn.CudnnLSTM(2 * hidden, hidden, batch_first=True) for _ in range(3))
        self.classifier = nn.Linear(hidden, vocab)
        self.dropout = nn.Dropout(0.2)

    def forward(self, source, target):
        x, _ = self.bidirectional(self.dropout(self.embed_source(source)))  # (B, S, 1024)
        for i, layer in enumerate(self.encoder):
            y, _ = layer(self.dropout(x))
            x = y + x if i > 0 else y
        keys = self.keys(x)  # (B, S, H)
        h, _ = self.decoder_first(self.dropout(self.embed_target(target)))  # (B, T, H)
        # Normalised Bahdanau attention: v . tanh(W q + U k) for every (target, source) pair.
        energies = self.energy(torch.tanh(self.query(h)[:, :, None] + keys[:, None])).squeeze(-1)  # (B, T, S)
        context = torch.bmm(F.softmax(energies, -1), x)
        for i, layer in enumerate(self.decoder):
            y, _ = layer(self.dropout(torch.cat([h, context], -1)))
            h = y + h if i > 0 else y
        return self.classifier(h)


def smoothed_loss(logits, target, smoothing: float = 0.1):
    log_probs = F.log_softmax(logits.reshape(-1, logits.shape[-1]), -1)
    nll = F.nll_loss(log_probs, target.reshape(-1))
    return (1 - smoothing) * nll - smoothing * log_probs.mean()


class NeuMF(nn.Module):
    """DLE's NCF on MovieLens-20M: 138493 users, 26744 items, a 64-wide matrix-factorisation embedding and a
    128-wide MLP embedding each, MLP 256-256-128-64, one logit."""

    def __init__(self, users: int = 138493, items: int = 26744, factors: int = 64, mlp=(256, 256, 128, 64)):
        super().__init__()
        self.mf_user, self.mf_item = nn.Embedding(users, factors), nn.Embedding(items, factors)
        self.mlp_user, self.mlp_item = nn.Embedding(users, mlp[0] // 2), nn.Embedding(items, mlp[0] // 2)
        self.mlp = nn.ModuleList(nn.Linear(a, b) for a, b in zip(mlp[:-1], mlp[1:]))
        self.final = nn.Linear(factors + mlp[-1], 1)

    def forward(self, users, items):
        mf = self.mf_user(users) * self.mf_item(items)
        x = torch.cat([self.mlp_user(users), self.mlp_item(items)], 1)
        for layer in self.mlp:
            x = F.relu(layer(x))
        return self.final(torch.cat([mf, x], 1)).squeeze(1)
