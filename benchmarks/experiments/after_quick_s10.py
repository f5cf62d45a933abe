import time, torch, os, subprocess
from benchmarks.common import bench_ms
from benchmarks.generalize import fresh_caches
from benchmarks.gen_kernels import CASES
import tilecraft as tc
cs = CASES["column_sum_tall"]; x = cs.make_inputs(cs.gpu_shapes[0], "cuda", 0)
base = cs.kernels[0]
cfg = base.bind(x).config_spec.default()
k = tc.kernel(base.fn, static_shapes=True, config=cfg)
k(*x)
print("before", bench_ms(lambda: k(*x)), flush=True)
sm = CASES["online_softmax_two_pass"]; y = sm.make_inputs(sm.gpu_shapes[0], "cuda", 0)
with fresh_caches():
    q = sm.variants(autotune_effort="quick")
    t = time.time(); sm.run(q, y); torch.cuda.synchronize(); print("quick s", time.time() - t, flush=True)
for delay in (0, 0, 2, 5, 10):
    time.sleep(delay)
    ps = subprocess.run("ps -eo pid,stat,pcpu,cmd | grep -c tilecraft.tools.worker", shell=True, capture_output=True, text=True).stdout.strip()
    print("after", delay, bench_ms(lambda: k(*x)), "workers", ps, "threads", __import__("threading").active_count(), flush=True)
