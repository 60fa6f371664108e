"""manifests/ds4-sm120.yaml on tokenspeed's real history (the seeds' corpus), offline.

`plan lock` and `plan check` run with ``--no-forge`` against the read-only snapshot, and
`audit pins` reads #640's head. Every expectation is computed here from git itself: ancestry,
``git cherry``, ``git patch-id --stable`` and ``git grep`` at the commit, never a list copied
from a past run. docs/rehearsal.md and docs/plan.md quote what these tests hold.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_run import invoke
from corpus import Corpus, tree_digest
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version
from ruamel.yaml import YAML
from wheels import write_wheel

REPO = Path(__file__).resolve().parent.parent
MANIFEST = REPO / "manifests" / "ds4-sm120.yaml"
NAME = "tokenspeed"
# The two wheel pins: (distribution, version, tag) as PyPI publishes them.
PINNED_WHEELS = (
    ("flashinfer-python", "0.6.14", "py3-none-any"),
    ("tokenspeed-deepgemm", "2.5.0.post20260629", "cp311-cp311-manylinux_2_28_x86_64"),
)


def releasekit(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return invoke(*args, env=env)


@dataclass(frozen=True)
class Checked:
    corpus: Corpus
    digest_before: str
    lock_rc: int
    lock: dict[str, Any]
    check_rc: int
    check: dict[str, Any]
    check_stdout: str
    pins_rc: int
    pins: dict[str, Any]


@pytest.fixture(scope="module")
def checked(corpus: Corpus, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Checked]:
    import os

    work = tmp_path_factory.mktemp("ds4-real")
    env = {**os.environ, "PYTHONPATH": str(REPO), "RELEASEKIT_CACHE": str(work / "cache")}
    before = tree_digest(corpus.path(NAME))
    # No index is reachable offline: the wheel pins are minimal real wheels of the names and
    # versions the pins ask for (plan lock refuses anything else); nothing here installs them.
    wheels = work / "wheels"
    for dist, version, tag in PINNED_WHEELS:
        write_wheel(wheels, dist, version, tag)
    mirror = corpus.mirror_args(NAME)
    lock = releasekit(
        "plan", "lock", str(MANIFEST), "-o", str(work / "lock.json"), "--wheelhouse", str(wheels),
        "--no-forge", *mirror, env=env,
    )  # fmt: skip
    assert lock.returncode == 0, lock.stdout + lock.stderr
    check = releasekit(
        "plan", "check", str(MANIFEST), "--lock", str(work / "lock.json"), "--no-forge",
        "--output", str(work / "plan-check.json"), *mirror, env=env,
    )  # fmt: skip
    again = releasekit(
        "plan", "check", str(MANIFEST), "--lock", str(work / "lock.json"), "--no-forge",
        "--output", str(work / "plan-check-again.json"), *mirror, env=env,
    )  # fmt: skip
    assert again.returncode == check.returncode
    # Records are byte-identical when run twice (the snapshot and the cache are read, never changed).
    assert (work / "plan-check-again.json").read_bytes() == (work / "plan-check.json").read_bytes()
    pins = releasekit(
        "audit", "pins", str(MANIFEST), "--repo", str(corpus.path(NAME)), "--commit", "refs/pull/640/head",
        "--component", NAME, "--json", env=env,
    )  # fmt: skip
    yield Checked(
        corpus=corpus,
        digest_before=before,
        lock_rc=lock.returncode,
        lock=json.loads((work / "lock.json").read_text(encoding="utf-8")),
        check_rc=check.returncode,
        check=json.loads((work / "plan-check.json").read_text(encoding="utf-8")),
        check_stdout=check.stdout,
        pins_rc=pins.returncode,
        pins=json.loads(pins.stdout),
    )


def manifest_component() -> dict[str, Any]:
    data: dict[str, Any] = YAML(typ="safe").load(MANIFEST.read_text(encoding="utf-8"))
    return data


def findings(report: dict[str, Any], code: str) -> list[dict[str, Any]]:
    listed = report["findings"]
    rows = listed["findings"] if isinstance(listed, dict) else listed
    return [row for row in rows if row["code"] == code]


class History:
    """What git says about one PR of the snapshot, relative to ``main``."""

    def __init__(self, corpus: Corpus, pr: int) -> None:
        self.corpus = corpus
        self.head = self.git("rev-parse", f"refs/pull/{pr}/head").strip()
        self.base = self.git("merge-base", "main", self.head).strip()

    def git(self, *args: str) -> str:
        return self.corpus.git(NAME, *args)

    def patch_ids(self, revs: str) -> dict[str, str]:
        """commit -> stable patch-id of every non-merge commit in ``revs``."""
        log = self.git("log", "-p", "--no-merges", "--format=commit %H", revs)
        out = subprocess.run(
            ["git", "patch-id", "--stable"], input=log, capture_output=True, text=True, check=True
        ).stdout
        return {commit: pid for pid, commit in (line.split() for line in out.splitlines())}

    def arrival(self) -> tuple[str, str | None]:
        """("ancestor" | "patch-id" | "squash" | "not-merged", the main commit it landed as)."""
        if self.head in self.git("rev-list", "main").split():
            return "ancestor", None
        cherry = self.git("cherry", "main", self.head).split("\n")
        marks = [line.split() for line in cherry if line]
        if marks and all(mark == "-" for mark, _ in marks):
            return "patch-id", None
        squashed = subprocess.run(
            ["git", "patch-id", "--stable"],
            input=self.git("diff", self.base, self.head),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        main_ids = self.patch_ids(f"{self.base}..main")
        landed = [commit for commit, pid in main_ids.items() if squashed and pid == squashed[0]]
        first_parent = set(self.git("rev-list", "--first-parent", f"{self.base}..main").split())
        landed = [commit for commit in landed if commit in first_parent]
        return ("squash", landed[0]) if landed else ("not-merged", None)


def history(corpus: Corpus, pr: int) -> History:
    return History(corpus, pr)


def test_lock_names_each_pr_head_of_the_snapshot(checked: Checked) -> None:
    assert checked.lock_rc == 0
    component = checked.lock["components"][NAME]
    git = lambda *args: checked.corpus.git(NAME, *args)  # noqa: E731
    assert component["commit"] == git("rev-parse", "main").strip()
    spec = manifest_component()["components"][NAME]
    planned = [row["pr"] for row in spec["merge_plan"]] + [row["pr"] for row in spec["already_canonical"]]
    locked = {row["number"]: row["head"] for row in component["pull_requests"]}
    assert sorted(locked) == sorted(planned)
    for pr, head in locked.items():
        assert head == git("rev-parse", f"refs/pull/{pr}/head").strip()


def test_how_each_planned_pr_arrived_matches_git(checked: Checked) -> None:
    spec = manifest_component()["components"][NAME]
    roles = {row["pr"]: "planned" for row in spec["merge_plan"]}
    roles |= {row["pr"]: "already_canonical" for row in spec["already_canonical"]}
    statuses = {row["pr"]: row for row in checked.check["components"][0]["statuses"]}
    first_parent = checked.corpus.git(NAME, "rev-list", "--first-parent", "--reverse", "main").split()
    not_merged = {row["location"]["pr"] for row in findings(checked.check, "PR_NOT_MERGED")}
    arrivals = {}
    for pr, role in roles.items():
        how, landed = history(checked.corpus, pr).arrival()
        arrivals[pr] = how
        status = statuses[pr]
        assert status["role"] == role
        if how == "not-merged":
            assert status["state"] == "not-merged", pr
            assert (pr in not_merged) == (role == "planned"), pr
        else:
            assert status["state"] == "merged", pr
            assert status["how"] == how, pr
            assert pr not in not_merged
        if landed is not None:
            assert status["landed_at"] == landed, pr
            assert status["landed_position"] == first_parent.index(landed), pr
    # The snapshot holds both outcomes: without them this test would compare nothing.
    assert "not-merged" in arrivals.values() and set(arrivals.values()) - {"not-merged"}
    assert checked.check_rc == 1


def test_planned_prs_that_conflict_with_main_name_the_files_git_merge_tree_names(checked: Checked) -> None:
    """Issue 44: `plan check` said nothing of conflicts (only `plan compose` did). Each planned PR not on
    main is merged into the locked commit by git itself here; its finding names exactly git's files."""
    locked = checked.lock["components"][NAME]
    heads = {row["number"]: row["head"] for row in locked["pull_requests"] if row["role"] == "planned"}
    not_merged = {row["location"]["pr"] for row in findings(checked.check, "PR_NOT_MERGED")}
    reported = {row["location"]["pr"]: row for row in findings(checked.check, "PR_CONFLICTS_WITH_CANONICAL")}
    assert not_merged and set(reported) <= not_merged
    assert not findings(checked.check, "PR_CONFLICT_UNCHECKED")
    for pr in sorted(not_merged):
        files = checked.corpus.conflicted_files(NAME, locked["commit"], heads[pr])
        if not files:
            assert pr not in reported
            continue
        message = reported[pr]["message"]
        assert f"in {len(files)} file(s): " in message and reported[pr]["location"]["path"] == files[0]
        assert all(name in message for name in files[:10]), (pr, files, message)


def test_duplicated_prerequisite_commits_are_the_equal_patch_ids(checked: Checked) -> None:
    spec = manifest_component()["components"][NAME]
    expected: set[tuple[str, str]] = set()
    for row in spec["merge_plan"]:
        later = history(checked.corpus, row["pr"])
        later_ids = later.patch_ids(f"{later.base}..{later.head}")
        for prerequisite in row.get("after", []):
            earlier = history(checked.corpus, prerequisite)
            earlier_ids = earlier.patch_ids(f"{earlier.base}..{earlier.head}")
            for commit, pid in later_ids.items():
                expected |= {(commit, other) for other, opid in earlier_ids.items() if opid == pid}
    rows = findings(checked.check, "DUPLICATED_PREREQUISITE_COMMIT")
    # The finding locates the later PR's copy and names the prerequisite's commit in its message.
    reported = {
        (row["location"]["commit"], earlier)
        for row in rows
        for later, earlier in expected
        if row["location"]["commit"] == later and earlier[:12] in row["message"]
    }
    assert expected, "seed 000's #648 holds copies of #645's commits"
    assert reported == expected
    assert len(rows) == len(expected)


def pinned_versions() -> dict[str, Version]:
    data = manifest_component()
    versions = {pin["package"]: Version(str(pin["version"])) for pin in data.get("pins", [])}
    for component in data["components"].values():
        if component.get("kind") == "wheel":
            name, _, version = component["requirement"].partition("==")
            versions[name] = Version(version)
    return versions


SPEC = r"((?:\s*(?:===|==|!=|<=|>=|~=|<|>)\s*[\w.*+!]+\s*,?)+)"


def mismatches_by_grep(corpus: Corpus, commit: str, files: list[str]) -> set[tuple[str, int]]:
    """(file, line) of every requirement at ``commit`` in ``files`` that excludes a pinned version."""
    expected: set[tuple[str, int]] = set()
    for package, version in pinned_versions().items():
        name = "[-_.]".join(re.escape(part) for part in re.split(r"[-_.]", package))
        # A runner image is tagged with the project it carries ("...-flashinfer-0.6.16").
        project = re.escape(package.removesuffix("-python"))
        tagged = rf"^\s*FROM\s+\S+:\S*{project}-([0-9][A-Za-z0-9.]*)"
        grep = corpus.git(NAME, "grep", "-n", "-i", "-E", "-e", name, "-e", tagged, commit, "--", *files)
        for hit in grep.splitlines():
            _, path, line, text = hit.split(":", 3)
            excluded = False
            for match in re.finditer(rf"(?<![\w-]){name}{SPEC}", text, re.IGNORECASE):
                try:
                    excluded |= version not in SpecifierSet(match.group(1).strip().rstrip(","))
                except InvalidSpecifier:
                    continue
            tag = re.match(tagged, text, re.IGNORECASE)
            if tag:
                excluded |= Version(tag.group(1).rstrip(".")) != version
            if excluded:
                expected.add((path, int(line)))
    return expected


def reported(report: dict[str, Any]) -> set[tuple[str, int]]:
    return {(row["location"]["file"], row["location"]["line"]) for row in findings(report, "PIN_MISMATCH")}


def test_pin_mismatches_at_the_locked_commit_are_the_git_grep_rows(checked: Checked) -> None:
    (pins,) = checked.check["pins"]
    commit = checked.lock["components"][NAME]["commit"]
    assert pins["commit"] == commit
    expected = mismatches_by_grep(checked.corpus, commit, pins["files"])
    assert expected, "main has moved past seed 000's pins"
    assert reported(checked.check) == expected


def test_pin_mismatches_at_pr_640_are_the_git_grep_rows(checked: Checked) -> None:
    commit = checked.corpus.git(NAME, "rev-parse", "refs/pull/640/head").strip()
    assert checked.pins["commit"] == commit
    assert checked.pins_rc == 1
    expected = mismatches_by_grep(checked.corpus, commit, checked.pins["files"])
    # #640's release workflow capped apache-tvm-ffi on a pip continuation line: the row must be
    # the requirement's own line, which the previous line continues into.
    workflow = ".github/workflows/release-tokenspeed-kernel.yml"
    continued = [
        line
        for path, line in expected
        if path == workflow
        and checked.corpus.git(NAME, "show", f"{commit}:{workflow}")
        .splitlines()[line - 2]
        .rstrip()
        .endswith("\\")
    ]
    assert continued
    assert reported(checked.pins) == expected


def test_skipped_inputs_are_the_manifests_amd_paths(checked: Checked) -> None:
    patterns = manifest_component()["components"][NAME]["pin_inputs"]["skip"][0]["paths"]
    for report in (checked.check["pins"][0], checked.pins):
        assert report["skipped"]
        for row in report["skipped"]:
            assert row["pattern"] in patterns
            assert re.search(r"amd|rocm", row["file"], re.IGNORECASE), row
            assert row["file"] not in report["files"]


def test_the_snapshot_is_left_byte_identical(checked: Checked) -> None:
    assert tree_digest(checked.corpus.path(NAME)) == checked.digest_before


def test_no_vcs_dependency_among_the_release_inputs(checked: Checked) -> None:
    (pins,) = checked.check["pins"]
    # git grep exits 1 when nothing matches: the corpus helper would raise, so count the lines.
    hits = subprocess.run(
        [
            "git",
            "--git-dir",
            str(checked.corpus.path(NAME)),
            "grep",
            "-n",
            "git+",
            pins["commit"],
            "--",
            *pins["files"],
        ],
        capture_output=True,
        text=True,
    )
    assert hits.returncode in (0, 1), hits.stderr
    expected = {line.split(":", 3)[1] for line in hits.stdout.splitlines()}
    found = {row["location"]["file"] for row in findings(checked.check, "VCS_DEPENDENCY")}
    assert found == expected
    # Elsewhere the tree does install from git (benchmark scripts): the scan's file set matters.
    assert checked.corpus.git(NAME, "grep", "-l", "git+", pins["commit"]).strip()
