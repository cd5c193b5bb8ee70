"""Holds known GPU memory for argv[1] seconds: 8 GiB of tensors and 4 GiB cached-free in PyTorch's allocator.

With a second argument it also allocates and frees 0-3 GiB and runs a matmul every half second (for --watch)."""

import sys
import time

import torch

x = torch.empty(8 * 2**30, dtype=torch.uint8, device="cuda")
y = torch.empty(4 * 2**30, dtype=torch.uint8, device="cuda")
del y
torch.cuda.synchronize()
print("ready", torch.cuda.memory_allocated(), torch.cuda.memory_reserved(), flush=True)
end = time.time() + float(sys.argv[1])
phase = 0
while time.time() < end:
    time.sleep(0.5)
    if len(sys.argv) > 2:  # moving phases for --watch
        phase += 1
        z = torch.empty((phase % 4) * 2**30, dtype=torch.uint8, device="cuda")
        a = torch.randn(4096, 4096, device="cuda")
        b = a @ a
        torch.cuda.synchronize()
        del a, b, z
