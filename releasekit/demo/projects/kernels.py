"""Files of the demo's CUDA component: a kernel compiled by nvcc into a shared library."""

PYPROJECT = """\
[build-system]
requires = []
build-backend = "rkdemo_backend"
backend-path = ["_build"]

[project]
name = "rkdemo-kernels"
description = "releasekit demo: a CUDA kernel library for SM120"
dynamic = ["version"]

[tool.rkdemo]
package = "rkdemo_kernels"
base-version = "0.2.0"
cuda = ["kernels/scale.cu"]
library = "librkdemo_kernels.so"
"""

INIT = '''\
"""releasekit demo kernels: the library is loaded on demand (there may be no GPU)."""

from pathlib import Path

from rkdemo_kernels._version import __commit__, __version__

__all__ = ["__commit__", "__version__", "library_path"]


def library_path() -> Path:
    return Path(__file__).with_name("librkdemo_kernels.so")
'''

KERNEL_V1 = """\
extern "C" __global__ void rk_scale(float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

extern "C" int rk_scale_launch(float *x, float a, int n) {
  rk_scale<<<(n + 127) / 128, 128>>>(x, a, n);
  return 0;
}
"""

KERNEL_PR5 = KERNEL_V1.replace("(n + 127) / 128, 128", "(n + 255) / 256, 256")
