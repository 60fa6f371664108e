"""GPU evidence for verify-provenance's native-arch check and in-image probe.

Run on a machine with an NVIDIA GPU, nvcc and cuobjdump (not in CI: CI has no GPU):

    python3 scripts/device/gpu_evidence.py OUT.json

1. compiles one tiny kernel library for several arch sets with nvcc;
2. reads each library's arches with releasekit's own ELF ``.nv_fatbin`` reader and with
   NVIDIA's ``cuobjdump`` and records whether they agree;
3. loads each library and launches its kernel on the GPU, recording whether it ran, and
   whether ``has_machine_code_for(<this GPU's arch>)`` predicted that;
4. runs the in-image probe under this machine's python3 (with torch) and records the
   torch / CUDA / cuDNN / NCCL facts it reports, next to what torch itself says.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from releasekit.provenance.fatbin import read_fatbin  # noqa: E402

KERNEL = r"""
#include <cuda_runtime.h>
__global__ void add_one(int *p) { p[threadIdx.x] += 1; }
extern "C" int rk_run(void) {
  int *d = 0; int h[32] = {0};
  cudaError_t e = cudaMalloc(&d, sizeof(h));
  if (e != cudaSuccess) return (int)e;
  cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice);
  add_one<<<1, 32>>>(d);
  e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
  cudaFree(d);
  if (e != cudaSuccess) return (int)e;
  for (int i = 0; i < 32; ++i) if (h[i] != 1) return -1;
  return 0;
}
"""

VARIANTS = {
    "sm_90a": ["-gencode", "arch=compute_90a,code=sm_90a"],
    "sm_120a": ["-gencode", "arch=compute_120a,code=sm_120a"],
    "sm_90a+sm_120a": [
        "-gencode",
        "arch=compute_90a,code=sm_90a",
        "-gencode",
        "arch=compute_120a,code=sm_120a",
    ],
    "sm_80": ["-gencode", "arch=compute_80,code=sm_80"],
    "ptx_compute_90": ["-gencode", "arch=compute_90,code=compute_90"],
    "sm_90+ptx_90": ["-gencode", "arch=compute_90,code=[sm_90,compute_90]"],
}


def cuobjdump_targets(lib: Path) -> dict[str, list[str]]:
    out = subprocess.run(
        ["cuobjdump", "--list-elf", "--list-ptx", str(lib)], capture_output=True, text=True
    ).stdout
    cubins = sorted({m.group(1) for m in re.finditer(r"ELF file\s+\d+:\s+\S*?\.(sm_\d+[af]?)\.cubin", out)})
    ptx = sorted(
        {
            m.group(1).replace("sm_", "compute_")
            for m in re.finditer(r"PTX file\s+\d+:\s+\S*?\.(sm_\d+[af]?)\.ptx", out)
        }
    )
    return {"cubin": cubins, "ptx": ptx, "raw": out.strip().splitlines()}


def gpu_arch() -> str:
    import torch

    major, minor = torch.cuda.get_device_capability(0)
    return f"{major}.{minor}"


def main() -> int:
    out_path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("gpu_evidence.json")
    evidence: dict[str, object] = {"gpu_arch": gpu_arch(), "libraries": {}}
    import torch

    evidence["gpu"] = torch.cuda.get_device_name(0)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.cu"
        src.write_text(KERNEL)
        for name, flags in VARIANTS.items():
            lib = Path(tmp) / f"lib_{name.replace('+', '_')}.so"
            subprocess.run(
                ["nvcc", "-shared", "-Xcompiler", "-fPIC", *flags, "-o", str(lib), str(src)], check=True
            )
            with lib.open("rb") as fh:
                report = read_fatbin(fh)
            ours = (
                {"cubin": report.cubin_targets(), "ptx": report.ptx_targets()}
                if report
                else {"cubin": [], "ptx": []}
            )
            theirs = cuobjdump_targets(lib)
            # Load in a child process so a failed launch cannot poison the next library's context.
            probe = subprocess.run(
                [sys.executable, "-c", f"import ctypes; print(ctypes.CDLL({str(lib)!r}).rk_run())"],
                capture_output=True,
                text=True,
                timeout=120,
            )
            code = probe.stdout.strip()
            predicted = report.has_machine_code_for(evidence["gpu_arch"] + "a") if report else False
            evidence["libraries"][name] = {
                "releasekit_fatbin": ours,
                "cuobjdump": {"cubin": theirs["cubin"], "ptx": theirs["ptx"]},
                "agree": ours == {"cubin": theirs["cubin"], "ptx": theirs["ptx"]},
                "rk_run_returned": code,
                "ran_on_gpu": code == "0",
                "machine_code_for_this_gpu": predicted,
            }
    probe_src = (ROOT / "releasekit" / "provenance" / "probe.py").read_text()
    probe = subprocess.run(
        [sys.executable, "-c", probe_src, json.dumps({"import_names": ["torch"]})],
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(probe.stdout)
    evidence["probe_toolchain"] = report.get("toolchain")
    evidence["torch_itself"] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
    }
    out_path.write_text(json.dumps(evidence, indent=2))
    print(json.dumps(evidence, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
