"""Runs one PEP 517 hook inside the isolated build environment (executed as a script).

It is run by the build venv's interpreter with the source directory as the working
directory, so nothing of releasekit (or of the calling interpreter) is importable in it.
Usage: python pep517_hooks.py HOOK RESULT_JSON [WHEEL_DIR CONFIG_SETTINGS_JSON]
       python pep517_hooks.py changed_sources RESULT_JSON SOURCE COPY
(the files of SOURCE, .git aside, that differ in COPY after the build: what it edited)
"""

import importlib
import json
import os
import sys
import tomllib


def _backend():
    with open("pyproject.toml", "rb") as fh:
        system = tomllib.load(fh).get("build-system", {})
    # PEP 517's fallback when a project names no backend.
    spec = system.get("build-backend", "setuptools.build_meta:__legacy__")
    for entry in reversed(system.get("backend-path", [])):
        sys.path.insert(0, os.path.abspath(entry))
    module_name, _, attr = spec.partition(":")
    obj = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj, system.get("requires", [])


def _same(a, b):
    if os.path.islink(a) or os.path.islink(b):
        return os.path.islink(a) and os.path.islink(b) and os.readlink(a) == os.readlink(b)
    if not os.path.isfile(b):
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def _changed(source, copy):
    changed = []
    for root, dirs, names in os.walk(source):
        dirs[:] = sorted(d for d in dirs if not (root == source and d == ".git"))
        for name in sorted(names):
            rel = os.path.relpath(os.path.join(root, name), source)
            if not _same(os.path.join(source, rel), os.path.join(copy, rel)):
                changed.append(rel)
    return changed


def main() -> int:
    hook, result_path = sys.argv[1], sys.argv[2]
    if hook == "changed_sources":
        with open(result_path, "w", encoding="utf-8") as fh:
            json.dump(_changed(sys.argv[3], sys.argv[4]), fh)
        return 0
    backend, static_requires = _backend()
    if hook == "get_requires_for_build_wheel":
        dynamic = getattr(backend, hook, None)
        result = {"static": static_requires, "dynamic": list(dynamic({}) if dynamic else [])}
    elif hook == "build_wheel":
        result = {"wheel": backend.build_wheel(sys.argv[3], json.loads(sys.argv[4]) or None, None)}
    else:
        raise SystemExit(f"unknown hook {hook}")
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
