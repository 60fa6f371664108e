"""The in-image probe: runs under the image's own python3 and prints one JSON document.

Standard library only, and written for any Python 3.8+, because it runs inside an image
whose interpreter releasekit does not control. It is passed as ``python3 -c SOURCE``
with the image's own environment and working directory, so ``sys.path`` is the one the
image's entrypoint would see (PYTHONPATH, ``.pth`` files, sitecustomize included).

A hostile image can make this probe lie (its sitecustomize runs first). The verifier
therefore only trusts it for what a running interpreter alone can tell (where a module
is imported from, torch's build versions); file contents and ownership are read from
the image's exported filesystem on the host instead.

Argument (argv[1]): a JSON object {"import_names": [...]}.
"""

import json
import os
import sys


def _distributions():
    out = []
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return out
    for dist in metadata.distributions():
        try:
            name = dist.metadata["Name"]
            version = dist.version
            location = str(getattr(dist, "_path", ""))
            direct_url = dist.read_text("direct_url.json")
        except Exception as exc:  # noqa: BLE001 - a broken dist-info is itself a finding
            out.append({"error": repr(exc)})
            continue
        out.append({"name": name, "version": version, "dist_info": location, "direct_url": direct_url})
    return out


def _spec(name):
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except Exception as exc:  # noqa: BLE001
        return {"name": name, "error": repr(exc)}
    if spec is None:
        return {"name": name, "found": False}
    locations = list(spec.submodule_search_locations or [])
    return {"name": name, "found": True, "origin": spec.origin, "search_locations": locations}


def _pth_files(paths):
    found = []
    for entry in paths:
        try:
            names = sorted(os.listdir(entry))
        except OSError:
            continue
        for name in names:
            if name.endswith(".pth"):
                found.append(os.path.join(entry, name))
    return found


def _toolchain():
    info = {"torch_present": False}
    try:
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            return info
    except Exception:  # noqa: BLE001
        return info
    info["torch_present"] = True
    try:
        import torch

        info["torch"] = str(torch.__version__)
        info["cuda"] = torch.version.cuda
        try:
            info["cudnn"] = (
                str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else None
            )
        except Exception:  # noqa: BLE001
            info["cudnn"] = None
        try:
            nccl = torch.cuda.nccl.version()
            info["nccl"] = ".".join(str(p) for p in nccl) if isinstance(nccl, tuple) else str(nccl)
        except Exception:  # noqa: BLE001 - CPU builds have no NCCL
            info["nccl"] = None
    except Exception as exc:  # noqa: BLE001
        info["error"] = repr(exc)
    return info


def main():
    request = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    import sysconfig

    paths = [os.path.abspath(p) if p else os.getcwd() for p in sys.path]
    customize = {}
    for name in ("sitecustomize", "usercustomize"):
        module = sys.modules.get(name)
        customize[name] = getattr(module, "__file__", None) if module is not None else None
    report = {
        "probe": "releasekit.probe/v1",
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "prefix": sys.prefix,
        "cwd": os.getcwd(),
        "sys_path": paths,
        "stdlib": [sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib")],
        "site_packages": [sysconfig.get_paths().get("purelib"), sysconfig.get_paths().get("platlib")],
        "env": {k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "LD_", "CUDA", "NCCL"))},
        "pth_files": _pth_files(paths),
        "customize": customize,
        "distributions": _distributions(),
        "specs": [_spec(n) for n in request.get("import_names", [])],
        "toolchain": _toolchain(),
    }
    sys.stdout.write(json.dumps(report))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
