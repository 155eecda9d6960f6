import time, torch, statistics
for dtype in (torch.float32, torch.bfloat16):
    for n in (1024, 2048, 4096):
        a = torch.randn(n, n, dtype=dtype); b = torch.randn(n, n, dtype=dtype)
        for _ in range(2): a @ b
        ts = []
        for _ in range(5):
            t = time.perf_counter(); a @ b; ts.append(time.perf_counter() - t)
        s = statistics.median(ts); tf = 2 * n**3 / s / 1e12
        print(f"{dtype} n={n}: {s*1e3:.1f} ms {tf:.3f} TFLOP/s", flush=True)
