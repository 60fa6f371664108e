"""Builders of real inputs for the publish tests: a manifest, a lock, evidence, receipts, images.

No test lives here; the publish test modules import these functions.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from releasekit.records.lock import (
    Lock,
    LockedBaseImage,
    LockedGitComponent,
    LockedManifest,
    LockedToolchain,
    lock_file_sha256,
    write_lock,
)

MANIFEST = """\
schema: releasekit/v1
name: pubtest
components:
  tiny:
    kind: git
    repo: https://example.invalid/tiny.git
    canonical_branch: main
toolchain:
  cuda_arch_list: ["12.0a"]
  base_image:
    name: scratch
    digest: to-be-locked
validation:
  forbidden:
    env: [VLLM_DISABLE_SHARED_EXPERTS_STREAM]
    args: [--disable-aux-streams]
    reason: no stream-disabling workaround
  cells:
    - id: tiny-tp1
      model: {name: tiny}
      env: {VLLM_CPU_KVCACHE_SPACE: "1"}
      extra_args: [--enforce-eager]
    - id: tiny-tp1-ngram
      model: {name: tiny}
      speculative: {mode: ngram, num_tokens: 3}
    - id: tiny-optional
      required: false
      model: {name: tiny}
"""

EXTRA_CELL = """\
    - id: tiny-tp2
      model: {name: tiny}
      parallel: {tp: 2}
"""

REQUIRED_CELLS = ["tiny-tp1", "tiny-tp1-ngram"]

IMAGE_ENV = {"VLLM_USE_V1": "1", "PYTHONUNBUFFERED": "1"}
IMAGE_CMD = ["serve", "--max-num-seqs", "8"]


class Release:
    """One release directory: manifest, lock, evidence and receipts for one image."""

    def __init__(self, root: Path, image_id: str, *, manifest_text: str = MANIFEST) -> None:
        self.root = root
        self.image_id = image_id
        self.evidence = root / "out"
        self.receipts = root / "receipts"
        self.evidence.mkdir(parents=True, exist_ok=True)
        self.receipts.mkdir(exist_ok=True)
        self.manifest = root / "manifest.yaml"
        self.manifest.write_text(manifest_text, encoding="utf-8")
        self.lock = self.evidence / "lock.json"
        import hashlib

        lock = Lock(
            name="pubtest",
            manifest=LockedManifest(
                path="../manifest.yaml",
                sha256=hashlib.sha256(self.manifest.read_bytes()).hexdigest(),
                name="pubtest",
            ),
            components={
                "tiny": LockedGitComponent(
                    name="tiny",
                    repo="https://example.invalid/tiny.git",
                    canonical_branch="main",
                    commit="a" * 40,
                    tree="b" * 40,
                    commit_time=1_700_000_000,
                    canonical_head="a" * 40,
                )
            },
            toolchain=LockedToolchain(base_image=LockedBaseImage(name="scratch")),
        )
        write_lock(lock, self.lock)
        self.lock_sha256 = lock_file_sha256(self.lock)
        self.write_plan_check()
        self.write_provenance()
        self.write_verification()
        (self.evidence / "RELEASE.md").write_text(
            "# pubtest\n\nBuilt from tiny@aaaaaaaaaaaa.\n", encoding="utf-8"
        )
        for cell in REQUIRED_CELLS:
            self.write_receipt(cell)

    def write_plan_check(
        self,
        *,
        lock_sha256: str | None = None,
        errors: list[str] = (),
        warnings: list[str] = (),
        passed: bool | None = None,
    ) -> None:
        """The result as ``plan check -o`` writes it (its record model)."""
        from releasekit.findings import Findings, Severity
        from releasekit.records.base import write_record
        from releasekit.records.plan_check import PlanCheckResult

        findings = Findings()
        for code in errors:
            findings.add(code, "x")
        for code in warnings:
            findings.add(code, "x", severity=Severity.warning)
        result = PlanCheckResult(
            passed=not errors if passed is None else passed,
            manifest_sha256="0" * 64,
            lock_sha256=lock_sha256 or self.lock_sha256,
            findings=findings,
        )
        write_record(result, self.evidence / "plan-check.json")

    def write_verification(
        self, *, image_id: str | None = None, result: str = "PASSED", sbom_sha256: str | None = None
    ) -> None:
        """The summary as verify-provenance writes it (its own model), over this provenance file
        (naming the SBOM ``sbom_sha256``, as verify-provenance does when it wrote one)."""
        from releasekit.clock import SystemClock
        from releasekit.provenance.summary import make_summary, write_summary
        from releasekit.records.verification import ReleasekitBlock

        summary = make_summary(
            image_id=image_id or self.image_id,
            passed=result == "PASSED",
            block=ReleasekitBlock(
                lock_sha256=self.lock_sha256, manifest_sha256="0" * 64, sbom_sha256=sbom_sha256
            ),
            provenance=self.evidence / "provenance.intoto.json",
            clock=SystemClock(),
        )
        write_summary(summary, self.evidence / "verification_summary.json")

    def write_provenance(self) -> None:
        data = {
            "_type": "https://in-toto.io/Statement/v1",
            "subject": [{"name": "image", "digest": {"sha256": self.image_id.split(":")[1]}}],
            "predicateType": "https://slsa.dev/provenance/v1",
            "predicate": {"buildDefinition": {"buildType": "releasekit"}, "runDetails": {}},
        }
        (self.evidence / "provenance.intoto.json").write_text(json.dumps(data), encoding="utf-8")

    def write_receipt(
        self,
        cell: str,
        *,
        passed: bool = True,
        image_id: str | None = None,
        lock_sha256: str | None = None,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
        name: str | None = None,
        cell_sha256: str | None = None,
    ) -> Path:
        """A real releasekit.receipt/v1 receipt, made with the validate stage's own model."""
        from releasekit.manifest import load_manifest
        from releasekit.records import receipt as rc

        loaded = load_manifest(self.manifest)
        definition = loaded.manifest.validation.cell(cell)
        assert definition is not None
        effective_env = dict(IMAGE_ENV)
        effective_env.update(definition.env)
        effective_env.update(env or {})
        argv = ["python3", "-m", "vllm.entrypoints.cli.main", "serve", "/models/tiny", "--port", "8000"]
        argv += ["--tensor-parallel-size", str(definition.parallel.tp)] + list(definition.extra_args)
        argv += list(args or [])
        receipt = rc.Receipt(
            cell_id=cell,
            cell=definition,
            cell_sha256=cell_sha256 or rc.cell_sha256(definition),
            image="releasekit-test/publish",
            image_id=image_id or self.image_id,
            lock_sha256=lock_sha256 or self.lock_sha256,
            manifest_sha256=loaded.sha256,
            manifest_name=loaded.manifest.name,
            passed=passed,
            status="passed" if passed else "failed",
            started_at="2026-12-02T00:00:00Z",
            finished_at="2026-12-02T00:01:00Z",
            duration_s=60.0,
            invocation=rc.Invocation(
                engine="vllm",
                argv=argv,
                env=effective_env,
                image_env=dict(IMAGE_ENV),
                cell_env=dict(definition.env),
            ),
            metrics={"decode.output_tok_s": rc.Metric(name="decode.output_tok_s", value=120.0, unit="tok/s")},
            gates=[
                rc.GateResult(
                    metric="decode.output_tok_s",
                    passed=passed,
                    candidate=120.0,
                    baseline="r34",
                    baseline_value=100.0,
                    ratio=1.2,
                    bound=">= 0.95 x baseline",
                )
            ],
        )
        path = self.receipts / (name or f"{cell}.json")
        path.write_text(json.dumps(receipt.model_dump(mode="json", by_alias=True)), encoding="utf-8")
        return path


def context_tar(files: dict[str, bytes]) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf


def build_image(client, tag: str, payload: dict[str, bytes], *, env: dict[str, str] | None = None) -> str:
    """A FROM-scratch image with the given files, env and command; cached by the builder."""
    env = IMAGE_ENV if env is None else env
    lines = ["FROM scratch", "COPY payload/ /payload/"]
    lines += [f"ENV {k}={v}" for k, v in sorted(env.items())]
    lines.append(f"CMD {json.dumps(IMAGE_CMD)}")
    files = {"Dockerfile": ("\n".join(lines) + "\n").encode()}
    files.update({f"payload/{name}": data for name, data in payload.items()})
    image, _ = client.images.build(
        fileobj=context_tar(files), custom_context=True, tag=tag, rm=True, forcerm=True
    )
    return image.id


def publish_args(release: Release, image: str, to: str, *tags: str) -> list[str]:
    args = [
        "publish",
        "--image",
        image,
        "--lock",
        str(release.lock),
        "--receipts",
        str(release.receipts),
        "--to",
        to,
        "--json",
    ]
    for tag in tags:
        args += ["--tag", tag]
    return args


# -- the publish gate on its own (test_publish_gate.py, test_publish_test_gate.py, test_check_evidence.py,
#    test_sbom.py) --------------------------------------------------------------------------------------

IMAGE_ID = "sha256:" + "4" * 64  # the image the gate tests' evidence is about


def facts(env: dict[str, str] | None = None, cmd: list[str] | None = None):
    """The gate's view of the image: ``IMAGE_ID`` with the image's env and command."""
    from releasekit.docker_engine import ImageFacts

    return ImageFacts(id=IMAGE_ID, env=dict(IMAGE_ENV if env is None else env), cmd=list(cmd or IMAGE_CMD))


def gate(release: Release, image=None):
    """The publish gate over ``release``'s files, as publish runs it."""
    from releasekit.manifest import load_manifest
    from releasekit.publish.evidence import load_evidence
    from releasekit.publish.gate import policy_from_manifest
    from releasekit.publish.service import evaluate_gate

    loaded = load_manifest(release.manifest)
    return evaluate_gate(
        image or facts(),
        release.lock_sha256,
        load_evidence(release.evidence, release.receipts),
        policy_from_manifest(loaded.manifest),
        manifest_sha256=loaded.sha256,
        lock_manifest_sha256=json.loads(release.lock.read_text())["manifest"]["sha256"],
    )


def codes(report) -> list[str]:
    """The error codes of a gate report, in order."""
    return [f.code for f in report.findings if f.severity.value == "error"]


# -- links a later step signs (test_signed_links.py, test_sign_command.py) ----------------------------


def staging_file(
    directory: Path,
    image_id: str = "sha256:" + "1" * 64,
    *,
    lock_sha256: str = "2" * 64,
    summary_sha256: str = "4" * 64,
) -> Path:
    """An unsigned ``staging.json`` in ``directory`` (what ``releasekit stage`` writes), about ``image_id``."""
    from releasekit.records.base import write_record
    from releasekit.records.staging import StagingRecord

    directory.mkdir(parents=True, exist_ok=True)
    record = StagingRecord(
        image_id=image_id,
        lock_sha256=lock_sha256,
        registry="127.0.0.1:5000",
        repository="team/staging",
        digest="sha256:" + "3" * 64,
        tag="lock-" + "2" * 64,
        media_type="application/vnd.oci.image.manifest.v1+json",
        verification_summary_sha256=summary_sha256,
    )
    path = directory / "staging.json"
    write_record(record, path)
    return path
