import time, os, sys
t0 = time.perf_counter()
import torch
from ampgan.config import TrainConfig
from ampgan.data import load_dataset
from ampgan.speed.step_timer import StepTimer
t1 = time.perf_counter()
config = TrainConfig(precision="fp32", batch_size=64, device="cpu", compile=True)
dataset = load_dataset("digits")
timer = StepTimer(config, dataset, torch.device("cpu"), data_parallel=False, across_ranks=False)
t2 = time.perf_counter()
first = timer()
steps = [timer() for _ in range(3)]
print(f"imports {t1-t0:.1f} s, build {t2-t1:.1f} s, first step {first:.1f} s, step {sorted(steps)[1]:.2f} s")
from torch._dynamo.utils import compile_times
print(compile_times(repr="str", aggregate=True))
