"""A tiny PEP 517 build backend for releasekit's demo components (stdlib only).

The version comes from git: ``<base>+g<first 12 hex of HEAD>``, and ``_version.py`` is
generated with the full commit, so the wheel names the commit its sources came from.
CUDA sources listed under ``[tool.rkdemo] cuda`` are compiled with nvcc for the arches
releasekit passes in RELEASEKIT_NVCC_GENCODE, into a shared library shipped in the wheel.
Every entry gets the SOURCE_DATE_EPOCH time, so the wheel is reproducible.
"""

import base64
import hashlib
import io
import os
import shlex
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile


def _config():
    with open("pyproject.toml", "rb") as fh:
        data = tomllib.load(fh)
    return data["project"], data.get("tool", {}).get("rkdemo", {})


def _commit():
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        # An sdist or a copied tree has no git: then the builder must say which commit it is.
        return os.environ["RELEASEKIT_SOURCE_COMMIT"]


def _version(tool):
    return f"{tool['base-version']}+g{_commit()[:12]}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def _compile_cuda(sources, output):
    gencode = os.environ.get("RELEASEKIT_NVCC_GENCODE", "-gencode arch=compute_120a,code=sm_120a")
    # -Xlinker -s drops the symbol table, which names nvcc's temporary files (they carry a PID).
    cmd = ["nvcc", "-shared", "-Xcompiler", "-fPIC", "-Xlinker", "-s", "-frandom-seed=rkdemo"]
    cmd += shlex.split(gencode) + ["-o", output] + sources
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    with open(output, "rb") as fh:
        return fh.read()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project, tool = _config()
    name, package = project["name"], tool["package"]
    version = _version(tool)
    commit = _commit()
    files = {}
    for root, _dirs, names in os.walk(package):
        for fname in names:
            if fname.endswith(".py"):
                path = os.path.join(root, fname)
                with open(path, "rb") as fh:
                    files[path.replace(os.sep, "/")] = fh.read()
    files[f"{package}/_version.py"] = (f'__version__ = "{version}"\n__commit__ = "{commit}"\n').encode()
    native = bool(tool.get("cuda"))
    if native:
        with tempfile.TemporaryDirectory() as tmp:
            lib = os.path.join(tmp, tool.get("library", "libkernels.so"))
            files[f"{package}/{os.path.basename(lib)}"] = _compile_cuda(tool["cuda"], lib)
    dist_name = name.replace("-", "_")
    tag = "py3-none-linux_x86_64" if native else "py3-none-any"
    info = f"{dist_name}-{version}.dist-info"
    requires = "".join(f"Requires-Dist: {r}\n" for r in project.get("dependencies", []))
    files[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        f"Summary: {project.get('description', '')}\n{requires}"
    ).encode()
    files[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: rkdemo-backend\nRoot-Is-Purelib: {'false' if native else 'true'}\nTag: {tag}\n"
    ).encode()
    record = []
    for path in sorted(files):
        digest = base64.urlsafe_b64encode(hashlib.sha256(files[path]).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(files[path])}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    stamp = time.gmtime(max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800))[:6]
    filename = f"{dist_name}-{version}-{tag}.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(files, key=lambda p: (p.startswith(info), p.endswith("RECORD"), p)):
            entry = zipfile.ZipInfo(path, date_time=stamp)
            entry.external_attr = 0o644 << 16
            zf.writestr(entry, files[path])
    with open(os.path.join(wheel_directory, filename), "wb") as fh:
        fh.write(buf.getvalue())
    print(f"built {filename}", file=sys.stderr)
    return filename
