# A real fp16 DCGAN step (64 px) in the decision's warm-up, the cap cut to 2 s: is the call stopped there?
import sys, time, torch
sys.path.insert(0, "tests")
from conftest import tiny_config
from ampgan.data import load_dataset
from ampgan.speed.decision import measure_with
from ampgan.speed.rounds import StoppingRule, UNTIL_DECIDED
from ampgan.speed.step_timer import StepTimer
def make(name):
    c = tiny_config(sets=("model.ngf=32", "model.ndf=32"), model="examples/pytorch_dcgan.py:dcgan", image_size=64, batch_size=16, precision=name)
    return StepTimer(c, load_dataset(c.data, seed=0), torch.device("cpu"), across_ranks=False)
start = time.perf_counter()
result, left_out = measure_with(make, StoppingRule(min_rounds=3, max_seconds=2.0, until=UNTIL_DECIDED))(["fp16"])
print("left out:", left_out, f"| whole measure {time.perf_counter() - start:.1f} s")
