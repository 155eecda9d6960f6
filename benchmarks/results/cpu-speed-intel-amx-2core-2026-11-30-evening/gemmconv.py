import time, torch, statistics
import torch.nn.functional as F
from torch import nn
torch.manual_seed(0)
def gemm_conv(x, w, stride=2, padding=1):
    B, C, H, W = x.shape; O, _, k, _ = w.shape
    Ho = (H + 2*padding - k)//stride + 1; Wo = (W + 2*padding - k)//stride + 1
    cols = F.unfold(x, k, padding=padding, stride=stride)         # (B, C*k*k, L)
    out = w.reshape(O, -1) @ cols                                   # (B, O, L)
    return out.view(B, O, Ho, Wo)
def gemm_conv_nhwc(x, w, stride=2, padding=1):
    # cols as (B*L, C*k*k) so the GEMM is one big 2-D matmul
    B, C, H, W = x.shape; O, _, k, _ = w.shape
    Ho = (H + 2*padding - k)//stride + 1; Wo = (W + 2*padding - k)//stride + 1
    cols = F.unfold(x, k, padding=padding, stride=stride).transpose(1, 2).reshape(B*Ho*Wo, C*k*k)
    out = cols @ w.reshape(O, -1).t()                               # (B*L, O)
    return out.view(B, Ho, Wo, O).permute(0, 3, 1, 2)
def bench(fn, x, w, n=7):
    out = fn(x, w); g = torch.randn_like(out)
    ts = []
    for i in range(n + 2):
        t = time.perf_counter(); fn(x, w).backward(g); 
        if i >= 2: ts.append(time.perf_counter() - t)
        x.grad = None; w.grad = None
    return statistics.median(ts)
for C, O, HW in [(64, 128, 16), (128, 256, 8)]:
    for dt, fmt in [(torch.bfloat16, torch.channels_last)]:
        x = torch.randn(256, C, HW, HW, dtype=dt).to(memory_format=fmt).requires_grad_(True)
        w = torch.randn(O, C, 4, 4, dtype=dt).to(memory_format=fmt).requires_grad_(True)
        conv = lambda x, w: F.conv2d(x, w, stride=2, padding=1)
        xc = x.detach().contiguous().requires_grad_(True); wc = w.detach().contiguous().requires_grad_(True)
        flops = 3 * 2 * 256 * (HW//2)**2 * O * C * 16
        for name, fn, xx, ww in [("onednn conv", conv, x, w), ("unfold+bmm", gemm_conv, xc, wc), ("unfold+2d gemm", gemm_conv_nhwc, xc, wc)]:
            s = bench(fn, xx, ww)
            print(f"C{C}->O{O} {HW}x{HW} {name:<15} {s*1e3:7.1f} ms {flops/s/1e12:.3f} TFLOP/s", flush=True)
    a = F.conv2d(x.float(), w.float(), stride=2, padding=1); b = gemm_conv_nhwc(x.float(), w.float())
    print("max diff", (a - b).abs().max().item())
