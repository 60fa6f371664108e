"""Seed 003 as real git repositories: a vLLM fork and B12X with their PRs, plus the manifest.

``World.build(tmp_path)`` makes both remotes with every PR opened (nothing merged);
tests then land PRs in whatever order and way they want and run the plan stage.

``plan_lock`` and ``plan_check`` run the plan stage's services with the effects its commands
make (the forge clients' opener, a lazy engine), so a test names only what it is about.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

from forge import Clock, Forge

from releasekit.docker_engine import LazyEngine
from releasekit.forge import GitHubForges
from releasekit.manifest import LoadedManifest
from releasekit.plan.check import PlanCheckOptions, check_plan
from releasekit.plan.locking import build_lock
from releasekit.records.lock import Lock
from releasekit.records.plan_check import PlanCheckResult

FF = "dev/fathomless-firmament"
VLLM_PLAN = [108, 97, 103, 98, 99, 100, 101, 102, 104, 109]


def plan_lock(loaded: LoadedManifest, **options: Any) -> Lock:
    """``build_lock`` with what ``plan lock`` makes: the forge clients (token and cache read from the
    environment now) and an engine reached only for a ``to-be-locked`` image (60 s)."""
    return build_lock(loaded, forges=GitHubForges(), engine=LazyEngine(timeout=60), **options)


def written_and_locked(root: Path, data: dict[str, Any]) -> tuple[Path, Path]:
    """``data`` written as ``root/manifest.yaml`` and locked (local repositories allowed, a git cache
    under ``root``) into ``root/lock.json``: the two paths."""
    from ruamel.yaml import YAML

    from releasekit.manifest import load_manifest
    from releasekit.records.lock import write_lock

    path = root / "manifest.yaml"
    with path.open("w") as handle:
        YAML().dump(data, handle)
    write_lock(
        plan_lock(load_manifest(path), cache_dir=root / "git-cache", allow_local=True), root / "lock.json"
    )
    return path, root / "lock.json"


def plan_check(loaded: LoadedManifest, options: PlanCheckOptions | None = None) -> PlanCheckResult:
    """``check_plan`` with the forge clients ``plan check`` makes (token and cache read from the environment now)."""
    return check_plan(loaded, options, forges=GitHubForges())


def _pr_files(n: int, parts: int = 1) -> list[dict[str, str | None]]:
    return [{f"vllm/pr{n}_{i}.py": f"# PR {n} part {i}\nVALUE = {n * 10 + i}\n"} for i in range(parts)]


class World:
    @classmethod
    def copy_of(cls, template: World, root: Path) -> World:
        """A private copy of a built world (building one costs seconds; copying, milliseconds)."""
        shutil.copytree(template.root, root, symlinks=True)
        world = copy.copy(template)
        world.root = root
        for attr in ("vllm", "b12x"):
            forge = copy.copy(getattr(template, attr))
            forge._prs = dict(forge._prs)
            rel = forge.root.relative_to(template.root)
            forge.root = root / rel
            forge.remote = forge.root / forge.remote.name
            forge.work = forge.root / forge.work.name
            forge.git("remote", "set-url", "origin", str(forge.remote))
            setattr(world, attr, forge)
        return world

    def __init__(self, root: Path) -> None:
        self.root = root
        clock = Clock()
        self.vllm = Forge(root / "vllm", "vllm", default_branch=FF, clock=clock)
        self.b12x = Forge(root / "b12x", "b12x", default_branch="master", clock=clock)
        self.vllm.init({"vllm/__init__.py": "__version__ = '0.0'\n", "vllm/mtp.py": "SYNC = True\n"})
        self.b12x.init({"b12x/__init__.py": "\n"})
        # Already canonical: #95 (merged) and the TP6 commit that supersedes #96.
        self.vllm.open_pr(95, _pr_files(95))
        self.vllm.merge_pr(95, "merge")
        self.tp6 = self.vllm.commit(
            {"vllm/tp6.py": "TP6 = True\n"}, "TP6 virtual sharding for target and draft models"
        )
        self.vllm.push(FF)
        self.vllm.open_pr(96, [{"vllm/tp6_old.py": "OLD = 1\n"}])
        self.vllm.open_pr(88, [{"vllm/integration.py": "MIXED = 1\n"}])
        # The v17 release branch: a release-only commit (83925ac7b6 in the seed) and a launcher.
        self.vllm.switch("release/v17", FF)
        self.release_only = self.vllm.commit(
            {"vllm/mtp.py": "SYNC = False  # fixed-width host sync removed\n"},
            "Remove fixed-width MTP host sync",
        )
        self.launcher = self.vllm.commit(
            {"deploy/launch.sh": "numactl ...\n"}, "Deployment launcher with NUMA pinning"
        )
        self.vllm.push("release/v17")
        self.vllm.switch(FF)
        for n in VLLM_PLAN:
            if n == 97:
                # Re-extracts the release-only change onto canonical together with new work: no commit
                # of it is a cherry-pick, but its change to vllm/mtp.py is the release-only commit's.
                self.vllm.open_pr(
                    97,
                    [
                        {
                            "vllm/mtp.py": "SYNC = False  # fixed-width host sync removed\n",
                            "vllm/mtp_width.py": "FIXED_WIDTH = True\n",
                        }
                    ],
                )
            elif n == 103:
                self.vllm.open_pr(103, [{"vllm/pr103_0.py": "A = 1\n"}, {"vllm/pr103_1.py": "B = 2\n"}])
            elif n == 109:
                self.vllm.open_pr(
                    109, [{"vllm/dspark.py": "CONSOLIDATED = True\n"}, {"vllm/pr109_1.py": "X = 1\n"}]
                )
            else:
                self.vllm.open_pr(n, _pr_files(n))
        for n in (105, 106, 107):
            self.vllm.open_pr(n, [{f"vllm/dspark_v{n}.py": f"OLD_{n} = True\n"}])
        for n in (28, 32, 34, 35, 33):
            self.b12x.open_pr(n, [{f"b12x/pr{n}.py": f"V = {n}\n"}])
        self.b12x.open_pr(31, [{"b12x/nf3.py": "NF3 = 1\n"}])
        self.b12x.merge_pr(31, "merge")

    def land_vllm(self, order: list[int], methods: dict[int, str] | None = None) -> None:
        methods = methods or {}
        for n in order:
            self.vllm.merge_pr(n, methods.get(n, "merge"))

    def land_b12x(self, order: list[int] = (28, 32, 34, 35), methods: dict[int, str] | None = None) -> None:  # type: ignore[assignment]
        methods = methods or {}
        for n in order:
            self.b12x.merge_pr(n, methods.get(n, "merge"))

    def manifest(self, **overrides: object) -> dict:
        vllm_plan = []
        for n in VLLM_PLAN:
            entry: dict[str, object] = {"pr": n, "title": f"PR {n}"}
            if n == 97:
                entry["carries"] = [self.release_only[:10]]
            if n == 103:
                entry["after"] = [97]
            if n == 104:
                entry["after"] = ["b12x#34"]
            if n == 109:
                entry["after"] = [108]
                entry["supersedes"] = [105, 106, 107]
            vllm_plan.append(entry)
        data: dict = {
            "schema": "releasekit/v1",
            "name": "ff-next-test",
            "components": {
                "vllm": {
                    "kind": "git",
                    "repo": self.vllm.url,
                    "canonical_branch": FF,
                    "distribution": "vllm",
                    "merge_plan": vllm_plan,
                    "already_canonical": [
                        {"pr": 95, "title": "NVFP4 MLA outer-scale"},
                        {"commit": self.tp6[:10], "title": "TP6 virtual sharding", "supersedes": [96]},
                    ],
                    "closed": [
                        {"pr": 88, "title": "Previous mixed integration branch", "reason": "re-extracted"}
                    ],
                },
                "b12x": {
                    "kind": "git",
                    "repo": self.b12x.url,
                    "canonical_branch": "master",
                    "distribution": "b12x",
                    "merge_plan": [
                        {"pr": 28, "title": "cute.compile callable"},
                        {"pr": 32, "title": "cooperative launch"},
                        {"pr": 34, "title": "W4A16 tile geometry"},
                        {"pr": 35, "title": "NVFP4 MLA KV cache", "supersedes": [33]},
                    ],
                    "already_canonical": [{"pr": 31, "title": "NF3 format support"}],
                },
            },
            "toolchain": {
                "base_image": {"name": "releasekit-test/none", "digest": "to-be-locked"},
                "cuda_arch_list": ["12.0a"],
            },
            "exclusions": [
                {
                    "id": "launchers",
                    "description": "Deployment launchers",
                    "reason": "own PR in the build repository",
                    "component": "vllm",
                    "paths": ["deploy/*"],
                    "message_pattern": "(?i)launcher",
                }
            ],
        }
        for key, value in overrides.items():
            data[key] = value
        return data

    def write_manifest(self, data: dict | None = None, name: str = "manifest.yaml") -> Path:
        path = self.root / name
        path.write_text(json.dumps(data or self.manifest(), indent=1))
        return path
