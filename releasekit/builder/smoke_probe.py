"""Install-from-wheel smoke test, run by the base image's python3 inside a throw-away container.

It sees only what pip installed under the staging root: for every expected
distribution it checks the installed version, every file against the installed
RECORD, and that each import name imports. Prints one JSON object; exit 1 on problems.
Usage: python3 smoke_probe.py STAGING_ROOT EXPECTED_JSON
"""

import base64
import csv
import glob
import hashlib
import importlib
import importlib.metadata
import json
import os
import sys
from typing import Any


def main() -> int:
    root, expected = sys.argv[1], json.loads(sys.argv[2])
    sites = sorted(
        glob.glob(os.path.join(root, "usr/local/lib/python3*/dist-packages"))
        + glob.glob(os.path.join(root, "usr/local/lib/python3*/site-packages"))
    )
    sys.path[:0] = sites
    report: dict[str, Any] = {
        "site_dirs": [s[len(root) :] for s in sites],
        "distributions": [],
        "problems": [],
    }
    for want in expected:
        entry = {"distribution": want["distribution"], "files": 0}
        try:
            dist = importlib.metadata.distribution(want["distribution"])
        except importlib.metadata.PackageNotFoundError:
            report["problems"].append(f"{want['distribution']}: not installed")
            continue
        entry["version"] = dist.version
        if dist.version != want["version"]:
            report["problems"].append(
                f"{want['distribution']}: installed {dist.version}, built {want['version']}"
            )
        base = str(dist.locate_file(""))
        if not base.startswith(root):
            report["problems"].append(f"{want['distribution']}: found outside the staged install ({base})")
        for row in csv.reader((dist.read_text("RECORD") or "").splitlines()):
            if not row or not row[1]:
                continue
            path = os.path.normpath(os.path.join(base, row[0]))
            algo, _, digest = row[1].partition("=")
            try:
                with open(path, "rb") as fh:
                    actual = (
                        base64.urlsafe_b64encode(hashlib.new(algo, fh.read()).digest()).rstrip(b"=").decode()
                    )
            except OSError:
                report["problems"].append(f"{want['distribution']}: {row[0]} listed in RECORD is missing")
                continue
            entry["files"] += 1
            if actual != digest:
                report["problems"].append(f"{want['distribution']}: {row[0]} differs from RECORD")
        for name in want["import_names"]:
            try:
                module = importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 - report any import failure
                report["problems"].append(f"{want['distribution']}: import {name} failed: {exc!r}")
                continue
            location = getattr(module, "__file__", None) or ""
            if not location.startswith(root):
                report["problems"].append(
                    f"{want['distribution']}: {name} imported from {location}, not the wheel"
                )
        report["distributions"].append(entry)
    print("RELEASEKIT-SMOKE " + json.dumps(report, sort_keys=True))
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
