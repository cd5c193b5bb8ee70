"""Ground truth for CUDA_VISIBLE_DEVICES straight from the driver API (libcuda), no torch: prints count and UUIDs."""

import ctypes
import json
import os

cuda = ctypes.CDLL("libcuda.so.1")
r = cuda.cuInit(0)
out = {"env": os.environ.get("CUDA_VISIBLE_DEVICES"), "cuInit": r}
if r == 0:
    n = ctypes.c_int()
    out["getcount_rc"] = cuda.cuDeviceGetCount(ctypes.byref(n))
    out["count"] = n.value
    uu = []
    for i in range(n.value):
        d = ctypes.c_int()
        cuda.cuDeviceGet(ctypes.byref(d), i)
        b = (ctypes.c_ubyte * 16)()
        cuda.cuDeviceGetUuid(b, d)
        h = bytes(b).hex()
        uu.append(f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    out["uuids"] = uu
print(json.dumps(out))
