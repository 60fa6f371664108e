"""Manifest schema v1: the pinned description of one release.

Everything a release needs is named here: components (git-built or wheel-pinned), each
component's merge plan, the toolchain, pins that must agree across files, the
validation matrix and the publish target. Types are enforced by pydantic (unknown keys
are errors); rules that span fields live in ``releasekit.manifest.checks``.

A value the source documents do not give (a full SHA, a wheel hash, a base-image
digest) is written as ``to-be-locked``; ``plan lock`` resolves it. That literal is
accepted only in fields that a lock can resolve.
"""

from __future__ import annotations

import posixpath
import re
from typing import Annotated, Literal

from packaging.requirements import InvalidRequirement, Requirement
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from releasekit.manifest.content_rules import ContentRule
from releasekit.manifest.path_patterns import check_pattern
from releasekit.manifest.testing import Hygiene, TestSuites
from releasekit.manifest.validation import ValidationSpec

SCHEMA_V1 = "releasekit/v1"
TO_BE_LOCKED = "to-be-locked"

# Keys whose value may be ``to-be-locked``: exactly the things ``plan lock`` resolves.
LOCKABLE_KEYS = frozenset({"commit", "sha256", "digest", "head", "revision"})

ToBeLocked = Literal["to-be-locked"]
FullSha = Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")]
CommitPrefix = Annotated[
    str, Field(pattern=r"^[0-9a-f]{7,40}$", description="a full or abbreviated commit SHA")
]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
ImageDigest = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
Name = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$", description="lower-case identifier")]
PRNumber = Annotated[int, Field(ge=1, le=10_000_000)]
# `after:` entries: a PR of the same component (108) or of another one ("b12x#34").
PRReference = PRNumber | Annotated[str, Field(pattern=r"^([a-z0-9][a-z0-9._-]{0,63}#)?[1-9][0-9]{0,7}$")]
ArchName = Annotated[
    str, Field(pattern=r"^[0-9]{1,2}\.[0-9][af]?$", description="CUDA arch such as 9.0a or 12.0a")
]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SupersededPR(StrictModel):
    """A PR that a planned one replaces, as reviewed: its head and why (each one is also in ``supersedes``)."""

    pr: PRNumber
    head: FullSha | ToBeLocked = TO_BE_LOCKED
    reason: str | None = Field(default=None, min_length=1)


class PlannedPR(StrictModel):
    """One pull request to merge into the canonical branch, in the listed order."""

    pr: PRNumber
    title: str = Field(min_length=1, max_length=400)
    after: list[PRReference] = Field(default_factory=list, description="PRs that must land before this one")
    supersedes: list[PRNumber] = Field(
        default_factory=list, description="PRs this one replaces; they must not be merged"
    )
    head: FullSha | ToBeLocked = TO_BE_LOCKED
    carries: list[CommitPrefix] = Field(
        default_factory=list, description="release-only commits whose change this PR brings onto canonical"
    )
    arrived_in: PRNumber | None = Field(
        default=None,
        description="acknowledged: this PR never had its own merge, it arrived inside this PR's merge",
    )
    superseded: list[SupersededPR] = Field(
        default_factory=list,
        description="what is known of the PRs in 'supersedes': their reviewed head and the reason",
    )
    note: str | None = None

    @model_validator(mode="after")
    def _superseded_are_superseded(self) -> PlannedPR:
        for old in self.superseded:
            if old.pr not in self.supersedes:
                raise ValueError(f"'superseded' names PR #{old.pr}, which is not in 'supersedes'")
        return self


class CanonicalChange(StrictModel):
    """A change already on the canonical branch, named by PR or by commit."""

    pr: PRNumber | None = None
    commit: CommitPrefix | None = None
    title: str = Field(min_length=1, max_length=400)
    supersedes: list[PRNumber] = Field(default_factory=list)
    note: str | None = None

    @model_validator(mode="after")
    def _one_reference(self) -> CanonicalChange:
        if (self.pr is None) == (self.commit is None):
            raise ValueError("give exactly one of 'pr' or 'commit'")
        return self


class ClosedPR(StrictModel):
    """A closed pull request or integration branch that must not be merged."""

    pr: PRNumber
    title: str = Field(min_length=1, max_length=400)
    reason: str = Field(min_length=1)


class BuildEnvironment(StrictModel):
    """Where the PEP 517 build runs: a builder image by digest, or a fresh venv with pinned requirements."""

    kind: Literal["venv", "image"] = "venv"
    image: str | None = None
    digest: ImageDigest | ToBeLocked | None = None
    requirements: list[str] = Field(
        default_factory=list, description="pinned build requirements (name==version)"
    )
    dockerfile: str | None = Field(
        default=None,
        description="the builder's recipe, relative to the manifest (e.g. ../dockerfiles/vllm-builder.Dockerfile)",
    )
    base: BaseImage | None = Field(
        default=None, description="the builder's base image by digest: passed as the BASE_IMAGE build ARG"
    )
    build_args: dict[str, str] = Field(
        default_factory=dict, description="build ARGs of the builder's Dockerfile"
    )
    context: dict[str, str] = Field(
        default_factory=dict,
        description="extra directories copied into the builder's build context: name -> path (relative to the manifest)",
    )

    @model_validator(mode="after")
    def _image_needs_name(self) -> BuildEnvironment:
        if self.kind == "image" and not self.image:
            raise ValueError("a builder of kind 'image' needs 'image'")
        return self


VERSION_POLICIES = ("scm", "stamp", "static")
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]


class VersionPolicy(StrictModel):
    """How the built version names the commit: ``scm`` (the backend does), ``stamp`` (releasekit does), ``static`` (nothing does).

    ``stamp`` says by which mechanism of the component's own: ``setuptools-scm``
    (SETUPTOOLS_SCM_PRETEND_VERSION), ``pyproject`` (the static ``[project] version``),
    ``env`` (a variable its setup.py reads) or ``file`` (a version.txt it reads).
    """

    policy: Literal["scm", "stamp", "static"] = "scm"
    reason: str | None = Field(
        default=None, min_length=1, description="why this policy; required for stamp and static"
    )
    stamp: Literal["setuptools-scm", "pyproject", "env", "file"] | None = None
    variable: EnvName | None = Field(default=None, description="stamp: env: the variable the build reads")
    file: str | None = Field(
        default=None,
        description="stamp: file: the version file, relative to the project (with pyproject: a second file to stamp)",
    )
    base: str | None = Field(
        default=None, description="stamp: setuptools-scm/env: the version before the local label"
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: object) -> object:
        return {"policy": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _complete(self) -> VersionPolicy:
        if self.policy != "scm" and not self.reason:
            raise ValueError(f"version policy {self.policy!r} needs a 'reason'")
        if self.file and self.stamp not in (None, "file", "pyproject"):
            raise ValueError("'file' belongs to stamp: file or stamp: pyproject")
        if self.policy != "stamp":
            if self.stamp or self.variable or self.file or self.base:
                raise ValueError("'stamp', 'variable', 'file' and 'base' belong to the 'stamp' policy only")
            return self
        if self.stamp is None:
            raise ValueError("the 'stamp' policy needs 'stamp': setuptools-scm, pyproject, env or file")
        if self.stamp == "env" and not self.variable:
            raise ValueError("stamp: env needs 'variable'")
        if self.stamp == "file" and not self.file:
            raise ValueError("stamp: file needs 'file'")
        if self.stamp in ("setuptools-scm", "env") and not self.base:
            raise ValueError(f"stamp: {self.stamp} needs 'base' (the version before +g<sha>)")
        return self


class BuildRecipe(StrictModel):
    backend: Literal["pep517"] = "pep517"
    version_policy: VersionPolicy = Field(
        default_factory=VersionPolicy, description="scm (default) | stamp | static, with a reason"
    )
    pass_env: list[EnvName] = Field(
        default_factory=list,
        description="host variables the build may read (declared: recorded, not refused)",
    )
    subdirectory: str | None = Field(
        default=None, description="where pyproject.toml is, relative to the repo root"
    )
    environment: BuildEnvironment = Field(default_factory=BuildEnvironment)
    native: bool = Field(default=False, description="compiles CUDA code with nvcc for the CUDA arch list")
    cuda_arch_list: list[ArchName] | None = Field(default=None, description="overrides the toolchain's list")
    env: dict[str, str] = Field(default_factory=dict)
    config_settings: dict[str, str] = Field(default_factory=dict)
    generated_files: list[str] = Field(
        default_factory=list,
        description="files the build writes (e.g. pkg/_version.py): not compared with git blobs",
    )


def _path_patterns(value: list[str]) -> list[str]:
    for pattern in value:
        check_pattern(pattern)
    return value


PathPatterns = Annotated[list[str], AfterValidator(_path_patterns)]


class PinInputSkip(StrictModel):
    """Release inputs that ``audit pins`` does not read, and why (listed as skipped in its record)."""

    paths: PathPatterns = Field(min_length=1, description="gitignore-style patterns of files not read")
    reason: str = Field(min_length=1)


class AcceptedContent(StrictModel):
    """Files whose content-rule hits (docs/plan.md, "Content rules") this release accepts, and why."""

    paths: PathPatterns = Field(min_length=1, description="gitignore-style patterns of the accepted files")
    rules: list[ContentRule] = Field(
        default_factory=list, description="the rules accepted there (absent: all)"
    )
    reason: str = Field(min_length=1)


class PinInputs(StrictModel):
    """Which of a component's files are pin inputs of this release (``audit pins``, ``plan check``)."""

    skip: list[PinInputSkip] = Field(default_factory=list)


class ForgeSpec(StrictModel):
    """Where a component's pull requests live: GitHub, or GitHub Enterprise by its API base URL.

    Read by ``plan lock`` (releasekit/forge/); every field may be derived for a github.com repo.
    """

    api_url: str | None = Field(
        default=None,
        max_length=2000,
        description="REST API base, e.g. https://ghe.example.com/api/v3; absent: https://api.github.com",
    )
    repo: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$",
        description="owner/name on the forge; absent: from a github.com repo URL",
    )
    base_branch: str | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="the branch every planned PR must target; absent: canonical_branch",
    )

    @field_validator("api_url")
    @classmethod
    def _api_url(cls, value: str | None) -> str | None:
        # A token goes to this URL: https only, except loopback (tests, a local forge).
        if value is not None and not re.match(
            r"^(https://[^\s/@]+|http://(127\.0\.0\.1|localhost|\[::1\])(:[0-9]+)?)(/\S*)?$", value
        ):
            raise ValueError("api_url must be https:// (http:// only for 127.0.0.1 or localhost)")
        return value


class UpstreamBase(StrictModel):
    """The repository a fork follows (vLLM's ``main``): its commits are never release-only.

    ``audit release-only`` and ``plan check`` fetch ``ref`` of ``repo`` into the component's
    mirror; release-side commits reachable from it are reported once, as an upstream base
    difference, not one by one.
    """

    repo: str = Field(min_length=1, max_length=2000)
    ref: str = Field(default="main", min_length=1, max_length=255)
    note: str | None = None


SandboxStep = Literal["build", "test", "hygiene"]


class ComponentSandbox(StrictModel):
    """What a component's sandboxed steps get beyond the default (docs/build.md, "Network grants").

    ``network``: the steps whose sandbox has a network (Docker's default bridge): ``build`` (its
    PEP 517 build), ``test`` (its test suites), ``hygiene`` (its repository's pre-commit hooks).
    Absent or empty: no step has one. Read only from the manifest the lock was made from.
    """

    network: list[SandboxStep] = Field(
        default_factory=list, description="steps whose sandbox may reach the network: build, test, hygiene"
    )

    @field_validator("network")
    @classmethod
    def _once(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("a step is named twice")
        return value


class GitComponent(StrictModel):
    kind: Literal["git"] = "git"
    repo: str = Field(min_length=1, max_length=2000)
    canonical_branch: str | None = Field(
        default=None, min_length=1, max_length=255, description="absent: the remote's default branch (HEAD)"
    )
    commit: FullSha | ToBeLocked | None = Field(
        default=None, description="pin; absent means the canonical branch head at lock time"
    )
    role: Literal["runtime", "build-repo", "native-library"] = "runtime"
    distribution: str | None = Field(default=None, description="the Python distribution the build produces")
    import_names: list[str] = Field(default_factory=list, description="top-level modules it provides")
    version: str | None = None
    build: BuildRecipe | None = None
    merge_plan: list[PlannedPR] = Field(default_factory=list)
    already_canonical: list[CanonicalChange] = Field(default_factory=list)
    closed: list[ClosedPR] = Field(default_factory=list)
    tests: TestSuites = Field(
        default_factory=list, description="suites run in the candidate image (releasekit test)"
    )
    hygiene: Hygiene | None = Field(
        default=None, description="linters on the composed tree (releasekit hygiene)"
    )
    release_refs: list[Annotated[str, Field(min_length=1, max_length=255)]] = Field(
        default_factory=list,
        description="release branches/refs that plan check always audits for release-only commits (e.g. release/v17)",
    )
    pin_inputs: PinInputs | None = Field(
        default=None,
        description="present: plan check audits the pins in this component's checked commit, minus `skip`",
    )
    forge: ForgeSpec | None = Field(
        default=None, description="where the pull requests live (absent: derived from a github.com repo)"
    )
    upstream: UpstreamBase | None = Field(
        default=None, description="the upstream this fork follows: its commits are not release-only"
    )
    scan_content: bool = Field(
        default=False,
        description=(
            "plan check reads this component's tree with the content rules (overlays, fixed-commit fetches, "
            "patches, deployment files): a hit no exclusion claims and no accepted_files entry accepts is a finding"
        ),
    )
    accepted_files: list[AcceptedContent] = Field(
        default_factory=list,
        description="content-rule hits in this component's tree that the release accepts, each with a reason",
    )
    runtime_recipes: PathPatterns | None = Field(
        default=None,
        description=(
            "gitignore-style patterns of the image recipes, launchers and Compose files this release uses: "
            "plan check names the runtime switches (VLLM_*, NCCL_*, ...) they set; absent: every recipe "
            "outside examples/, tests/, .buildkite/, .github/, benchmarks/ and docs/"
        ),
    )
    sandbox: ComponentSandbox | None = Field(
        default=None, description="grants to this component's sandboxed steps (absent: no network for any)"
    )
    note: str | None = None

    def network_granted(self, step: SandboxStep) -> bool:
        """Whether the manifest grants ``step`` of this component a network in its sandbox."""
        return self.sandbox is not None and step in self.sandbox.network

    def superseding(self) -> list[PlannedPR | CanonicalChange]:
        """Every entry that may supersede older PRs: the merge plan, then what is already canonical."""
        return [*self.merge_plan, *self.already_canonical]

    @model_validator(mode="after")
    def _built_needs_distribution(self) -> GitComponent:
        if self.build is not None and self.role == "runtime" and not self.distribution:
            raise ValueError("a built runtime component needs 'distribution'")
        return self


class WheelSource(StrictModel):
    """Where a pinned wheel was built from (recorded, and checked by ``plan lock`` when reachable)."""

    repo: str
    ref: str | None = None
    commit: CommitPrefix | ToBeLocked | None = None
    note: str | None = None


class WheelComponent(StrictModel):
    kind: Literal["wheel"] = "wheel"
    requirement: str = Field(description="exactly name==version")
    sha256: Sha256 | ToBeLocked
    filename: str | None = None
    index_url: str | None = None
    import_names: list[str] = Field(default_factory=list)
    source: WheelSource | None = None
    note: str | None = None

    @field_validator("requirement")
    @classmethod
    def _exact_pin(cls, value: str) -> str:
        try:
            req = Requirement(value)
        except InvalidRequirement as exc:
            raise ValueError(f"not a requirement: {exc}") from None
        specs = list(req.specifier)
        if req.url or len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
            raise ValueError("a wheel pin must be exactly name==version")
        return value

    @property
    def distribution(self) -> str:
        return Requirement(self.requirement).name

    @property
    def version(self) -> str:
        return next(iter(Requirement(self.requirement).specifier)).version


Component = Annotated[GitComponent | WheelComponent, Field(discriminator="kind")]


class BaseImage(StrictModel):
    name: str = Field(min_length=1)
    digest: ImageDigest | ToBeLocked


class Toolchain(StrictModel):
    base_image: BaseImage
    # None: the document does not pin it; the build records what the base image has.
    cuda: str | None = None
    nccl: str | None = None
    pytorch: str | None = None
    cudnn: str | None = None
    python: str | None = Field(
        default=None,
        pattern=r"^3\.[0-9]{1,2}(\.[0-9]{1,3})?$",
        description="the image's CPython version, e.g. 3.12: wheels must fit it (plan lock)",
    )
    platform: str | None = Field(
        default=None,
        pattern=r"^((manylinux|musllinux)_[0-9]+_[0-9]+|linux)_[a-z0-9_]+$",
        description="the image's most specific wheel platform tag, e.g. manylinux_2_39_x86_64 (glibc 2.39)",
    )
    cuda_arch_list: list[ArchName] = Field(min_length=1)


PinScope = Literal["build", "runtime", "release"]
PIN_SCOPES: tuple[PinScope, ...] = ("build", "runtime", "release")


class Pin(StrictModel):
    """A package version that every build, runtime and release input must agree on."""

    package: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    version: str = Field(min_length=1)
    scopes: list[PinScope] = Field(default_factory=lambda: list(PIN_SCOPES))
    reason: str | None = None


# Dispositions whose change must not appear: a ``manifest validate`` warning when plan check
# cannot recognise it (EXCLUSION_NOT_CHECKABLE); the others are recorded decisions (info).
REQUIRED_DISPOSITIONS = frozenset({"excluded", "own-pr-required", "superseded"})
PatchId = Annotated[
    str, Field(pattern=r"^[0-9a-f]{40}$", description="a git patch-id (git patch-id --stable)")
]
_UPSTREAM_SHORT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)#([1-9][0-9]{0,7})$")


class UpstreamChange(StrictModel):
    """An upstream pull request whose commits must not appear, recognised by their patch-ids.

    The PR's commits are read from ``refs/pull/<pr>/head`` of ``repo`` when that repository
    is reachable (fetched into the component's mirror: a fork shares its history);
    ``patch_ids`` (and ``commits``, when present in the component's mirror) need no network.
    The short form ``owner/name#N`` means ``https://github.com/owner/name.git`` PR N.
    """

    repo: str = Field(min_length=1, max_length=2000)
    pr: PRNumber | None = None
    commits: list[CommitPrefix] = Field(default_factory=list)
    patch_ids: list[PatchId] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: object) -> object:
        if isinstance(value, str):
            m = _UPSTREAM_SHORT.match(value.strip())
            if not m:
                raise ValueError("an upstream change is owner/name#N or {repo, pr, commits, patch_ids}")
            return {"repo": f"https://github.com/{m.group(1)}.git", "pr": int(m.group(2))}
        return value

    @model_validator(mode="after")
    def _something(self) -> UpstreamChange:
        if self.pr is None and not self.commits and not self.patch_ids:
            raise ValueError("an upstream change needs 'pr', 'commits' or 'patch_ids'")
        return self


class Exclusion(StrictModel):
    """A change that is deliberately NOT part of this release."""

    id: Name
    description: str = Field(min_length=1)
    disposition: Literal[
        "excluded", "own-pr-required", "deferred", "experimental", "out-of-scope", "alternative", "superseded"
    ] = "excluded"
    reason: str = Field(min_length=1)
    component: str | None = Field(default=None, description="where it would appear; absent: any component")
    # How plan check recognises it if it shows up anyway. None of them: it is recorded, not checkable.
    pr: PRNumber | None = None
    upstream: UpstreamChange | None = Field(
        default=None, description="an upstream PR: vllm-project/vllm#47979, or {repo, pr, commits, patch_ids}"
    )
    commits: list[CommitPrefix] = Field(default_factory=list)
    patch_ids: list[PatchId] = Field(
        default_factory=list, description="patch-ids of the excluded change's commits"
    )
    paths: PathPatterns = Field(
        default_factory=list, description="gitignore-style patterns of files that must not appear"
    )
    message_pattern: str | None = Field(default=None, description="regex over commit subjects")
    rules: list[ContentRule] = Field(
        default_factory=list,
        description="content rules whose hits in the component's tree at the checked commit are this change",
    )

    @field_validator("message_pattern")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return value

    def checkable(self) -> bool:
        """Does plan check have anything to recognise this change by?"""
        return bool(
            self.pr
            or self.upstream
            or self.commits
            or self.patch_ids
            or self.paths
            or self.message_pattern
            or self.rules
        )


class AcceptedRequirement(StrictModel):
    """Requirements of installed distributions that the image does not meet and this release accepts,
    with a reason (verify-provenance's ``requirements`` check: shown, not failed)."""

    requirements: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")]] = Field(
        min_length=1, description="names of the required distributions, e.g. cuda-python"
    )
    required_by: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$",
        description="the distribution whose requirement it is (absent: any)",
    )
    reason: str = Field(min_length=1)


class RuntimeSwitch(StrictModel):
    """An environment setting that changes the engine's behaviour (``VLLM_*``, ``NCCL_*``, ...) which this
    release sets on purpose, in a component's recipes or the image's config (shown, not failed)."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")
    value: str | None = Field(default=None, description="the value it is declared with (absent: any value)")
    reason: str = Field(min_length=1)


class Policy(StrictModel):
    forbid_vcs_dependencies: bool = Field(
        default=True, description="git+…/name @ URL dependencies are findings"
    )
    forbidden_distributions: list[str] = Field(
        default_factory=list,
        description="glob patterns of distributions that must not be installed (e.g. nvidia-*)",
    )
    allowed_distributions: list[str] = Field(default_factory=list, description="exceptions to the above")
    accepted_requirements: list[AcceptedRequirement] = Field(
        default_factory=list,
        description="unmet or conflicting requirements of installed distributions this release accepts, each with a reason",
    )
    runtime_switches: list[RuntimeSwitch] = Field(
        default_factory=list,
        description="runtime switches (VLLM_*, NCCL_*, ...) the release sets on purpose, each with a reason",
    )


class PublishTarget(StrictModel):
    repository: str = Field(min_length=1, description="REGISTRY/REPO")
    tags: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.{}-]{0,127}$")]] = Field(
        default_factory=list
    )
    promote: dict[str, str] = Field(default_factory=dict, description="channel moves, e.g. beta: stable")
    staging: str | None = Field(
        None,
        description="REGISTRY/REPO the verified candidate is staged in by digest (releasekit stage), for GPU hosts to pull",
    )
    signed: bool = Field(
        False, description="stage, publish and promote require signed evidence (DSSE, --trusted-key)"
    )
    trusted_keys: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list,
        description="public keys (PEM files, relative to the manifest) whose signatures stage, publish and "
        "promote accept when no --trusted-key is given; e.g. ../keys/release.pub",
    )
    require_reproduced: bool = Field(
        False,
        description="promote to the stable channel requires a signed reproduce receipt for the digest "
        "(promote --reproduced), made on a runner that did not run the build",
    )
    reproducer_keys: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list,
        description="public keys (PEM files, relative to the manifest) whose signature on a reproduce "
        "receipt promote accepts; never one of trusted_keys (a key of its own)",
    )

    @model_validator(mode="after")
    def _reproducer_keys_are_their_own(self) -> PublishTarget:
        own = {posixpath.normpath(k) for k in self.reproducer_keys}
        shared = sorted(own & {posixpath.normpath(k) for k in self.trusted_keys})
        if shared:
            raise ValueError(
                f"reproducer_keys names {shared[0]}, which trusted_keys names too: a reproduction must be "
                "signed by a key of its own"
            )
        if self.require_reproduced and not self.reproducer_keys:
            raise ValueError(
                "require_reproduced needs reproducer_keys: the keys that sign reproduce receipts"
            )
        return self

    def stable_channels(self) -> set[str]:
        """The stable channel(s): where ``promote:`` moves end (a move's target that is no move's source;
        ``beta: stable`` gives ``stable``), else ``stable``."""
        targets = set(self.promote.values())
        return (targets - set(self.promote)) or targets or {"stable"}


class Provenance(StrictModel):
    """What the release documentation and image labels must record (seed 003, step 3)."""

    record: list[str] = Field(default_factory=list)


BuildEnvironment.model_rebuild()
BuildRecipe.model_rebuild()
GitComponent.model_rebuild()


class Manifest(StrictModel):
    schema_: Literal["releasekit/v1"] = Field(alias="schema")
    name: Name
    description: str | None = None
    sources: list[str] = Field(default_factory=list, description="documents this manifest encodes")
    components: dict[Name, Component] = Field(min_length=1)
    toolchain: Toolchain
    pins: list[Pin] = Field(default_factory=list)
    policy: Policy = Field(default_factory=Policy)
    exclusions: list[Exclusion] = Field(default_factory=list)
    provenance: Provenance = Field(default_factory=Provenance)
    validation: ValidationSpec = Field(default_factory=ValidationSpec)
    publish: PublishTarget | None = None

    def git_components(self) -> dict[str, GitComponent]:
        return {k: v for k, v in self.components.items() if isinstance(v, GitComponent)}

    def wheel_components(self) -> dict[str, WheelComponent]:
        return {k: v for k, v in self.components.items() if isinstance(v, WheelComponent)}
