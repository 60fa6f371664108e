"""Deterministic image assembly: base layers + one layer of installed wheels, loaded as a tar.

Debian's Engine 20.10 stamps build times into images, so ``docker build`` cannot give the
same image ID twice. Instead (as ko and apko do) the final image is written in
``docker save`` format: the base's layers as they are, plus one layer made from what pip
installed in a throw-away container of the base image, re-packed with sorted entries,
fixed mtimes and owners; the config JSON is canonical with ``created`` set from
SOURCE_DATE_EPOCH. ``docker load`` then gives the image ID sha256(config), every time.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from pydantic import BaseModel

from releasekit import atomic
from releasekit.atomic import write_atomic
from releasekit.builder.dockerfile import ImageSettings
from releasekit.digests import file_sha256
from releasekit.docker_engine import ContainerSpec, Engine, Sandbox
from releasekit.errors import BuildFailed, EnvironmentProblem

SMOKE_PROBE = Path(__file__).with_name("smoke_probe.py")
STAGING = "/releasekit-stage"
SANDBOX_USER = "65534:65534"  # nobody
INBOX = "/tmp/releasekit-wheels"
LAYER_FORMAT = "releasekit.layer/v1"


class WheelInput(BaseModel):
    path: str
    filename: str
    sha256: str
    distribution: str
    version: str
    import_names: list[str]


class SmokeReport(BaseModel):
    site_dirs: list[str] = []
    distributions: list[dict] = []
    problems: list[str] = []


class AssembledImage(BaseModel):
    image_id: str
    config_digest: str
    layer_digest: str  # sha256 of the uncompressed wheels layer (its diff ID)
    layer_size: int
    base_size: int
    created: str
    smoke: SmokeReport


def rfc3339(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def install_command(wheels: list[WheelInput]) -> list[str]:
    expected = json.dumps(
        [
            {"distribution": w.distribution, "version": w.version, "import_names": w.import_names}
            for w in wheels
        ]
    )
    install = (
        "python3 -m pip install --quiet --disable-pip-version-check --no-deps --no-index --no-compile "
        f"--require-hashes --break-system-packages --root {STAGING} "
        f"-r {INBOX}/requirements.txt"
    )
    return [
        "/bin/sh",
        "-c",
        f'{install} && python3 -B {INBOX}/smoke_probe.py {STAGING} "$RELEASEKIT_EXPECTED"',
        expected,
    ]


def stage_wheels(wheels: list[WheelInput], inbox: Path) -> None:
    inbox.mkdir(parents=True)
    lines = []
    for w in sorted(wheels, key=lambda w: w.filename):
        shutil.copyfile(w.path, inbox / w.filename)
        lines.append(f"{INBOX}/{w.filename} --hash=sha256:{w.sha256}")
    (inbox / "requirements.txt").write_text("\n".join(lines) + "\n")
    shutil.copyfile(SMOKE_PROBE, inbox / "smoke_probe.py")


def _smoke(output: str) -> SmokeReport | None:
    for line in output.splitlines():
        if line.startswith("RELEASEKIT-SMOKE "):
            return SmokeReport.model_validate_json(line.removeprefix("RELEASEKIT-SMOKE "))
    return None


def install_layer(
    engine: Engine,
    base_id: str,
    wheels: list[WheelInput],
    source_date_epoch: int,
    layer_out: Path,
    *,
    log: Path,
) -> SmokeReport:
    """pip-install the wheels into a staging root in a clean base container; re-pack it as a layer."""
    with tempfile.TemporaryDirectory(prefix="releasekit-layer-") as tmp:
        inbox = Path(tmp) / "inbox"
        stage_wheels(wheels, inbox)
        exported = Path(tmp) / "stage.tar"
        cmd = install_command(wheels)
        # The smoke probe imports the components' code: it runs as nobody in a sandbox (issue 43),
        # the wheels mounted read-only, the staging root its only writable place besides /tmp.
        env = {"RELEASEKIT_EXPECTED": cmd.pop(), "HOME": "/tmp", "PIP_NO_CACHE_DIR": "1"}
        spec = ContainerSpec(
            base_id,
            entrypoint=cmd[:2],
            command=cmd[2:],
            environment=env,
            user=SANDBOX_USER,
            network=False,
            read_only_mounts={str(inbox): INBOX},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            pids_limit=4096,
            log_max_size="64m",
        )
        result = engine.run_sandboxed(spec, Sandbox(writable=[STAGING], export=STAGING, export_to=exported))
        if result.exit_code == 0 and not exported.is_file():
            raise BuildFailed(f"the wheels layer could not be read from the install container (see {log})")
        write_atomic(log, result.output)
        report = _smoke(result.output)
        if result.exit_code != 0:
            if report and report.problems:
                raise BuildFailed(f"install-from-wheel smoke test failed: {report.problems[0]} (see {log})")
            raise BuildFailed(f"installing the wheels into the base image failed (see {log})")
        repack(exported, layer_out, strip=STAGING.strip("/") + "/", mtime=source_date_epoch)
    return report or SmokeReport()


def repack(src: Path, dest: Path, *, strip: str, mtime: int) -> None:
    """Re-write a tar deterministically: sorted names, one mtime, root owner, no extended headers."""
    with tarfile.open(src) as tin:
        members = []
        for m in tin.getmembers():
            name = m.name.lstrip("./")
            if not name.startswith(strip):
                continue
            name = name[len(strip) :].rstrip("/")
            if not name:
                continue
            fh = tin.extractfile(m) if m.isfile() else None
            data = fh.read() if fh is not None else None
            members.append((name, m, data))
    with dest.open("wb") as fh, tarfile.open(fileobj=fh, mode="w", format=tarfile.GNU_FORMAT) as tout:
        for name, m, data in sorted(members, key=lambda x: x[0]):
            info = tarfile.TarInfo(name)
            info.type = m.type
            info.mode = m.mode & 0o7777
            info.mtime = mtime
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.linkname = m.linkname
            if data is not None:
                info.size = len(data)
                tout.addfile(info, io.BytesIO(data))
            else:
                tout.addfile(info)


# The history comment of the release layer: part of the config, so of the image ID.
HISTORY_COMMENT = "releasekit build: wheels installed by hash"


def image_config(
    base_config: dict, layer_diff_id: str, settings: ImageSettings, created: str, comment: str
) -> bytes:
    config = {
        key: base_config[key] for key in ("architecture", "os", "variant", "os.version") if key in base_config
    }
    inherited = dict(base_config.get("config") or {})
    env = {}
    for item in inherited.get("Env") or []:
        key, _, value = item.partition("=")
        env[key] = value
    env.update(settings.env)
    runtime: dict = {
        "Env": [f"{k}={v}" for k, v in env.items()],
        "Labels": dict(sorted(settings.labels.items())),
    }
    for key, value in (
        ("Cmd", settings.cmd if settings.cmd is not None else inherited.get("Cmd")),
        (
            "Entrypoint",
            settings.entrypoint if settings.entrypoint is not None else inherited.get("Entrypoint"),
        ),
        ("WorkingDir", settings.workdir or inherited.get("WorkingDir")),
        ("User", settings.user or inherited.get("User")),
    ):
        if value:
            runtime[key] = value
    config["config"] = runtime
    config["created"] = created
    history = list(base_config.get("history") or [])
    history.append({"created": created, "created_by": comment})
    config["history"] = history
    rootfs = dict(base_config.get("rootfs") or {"type": "layers", "diff_ids": []})
    config["rootfs"] = {"type": "layers", "diff_ids": [*rootfs.get("diff_ids", []), layer_diff_id]}
    return json.dumps(config, sort_keys=True, separators=(",", ":")).encode()


class BaseLayers(BaseModel):
    config: dict
    diff_ids: list[str]
    size: int
    # "sha256:" + the sha256 of the config's bytes as docker save wrote them ("" in old cache entries):
    # equal to the image ID the engine reports for the image, which is what lets a reader check it.
    config_digest: str = ""


def base_layers(engine: Engine, base_id: str, into: Path, *, keep_layers: bool) -> BaseLayers:
    """``docker save`` the base: its config, and (``keep_layers``) its layer tars under ``into``."""
    archive = into / "base.tar"
    with archive.open("wb") as fh:
        for chunk in engine.save(base_id):
            fh.write(chunk)
    size = 0
    with tarfile.open(archive) as tar:
        manifest = json.load(_member(tar, "manifest.json"))[0]
        raw_config = _member(tar, manifest["Config"]).read()
        config = json.loads(raw_config)
        diff_ids = config["rootfs"]["diff_ids"]
        for layer_name, diff_id in zip(manifest["Layers"], diff_ids, strict=True):
            member = tar.getmember(layer_name)
            size += member.size
            if keep_layers:
                target = into / f"{diff_id.split(':')[1]}.tar"
                with _member(tar, member) as src, target.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
    archive.unlink()
    digest = "sha256:" + hashlib.sha256(raw_config).hexdigest()
    return BaseLayers(config=config, diff_ids=diff_ids, size=size, config_digest=digest)


def cached_base(engine: Engine, base_id: str, cache_dir: Path | None) -> BaseLayers:
    """The base's config and layer list, saved once per base image ID (``docker save`` takes seconds).

    The entry is written whole or not at all (``releasekit.atomic``), under its own lock: two
    builds wanting the same base at once save it once.
    """
    if cache_dir is None:
        with tempfile.TemporaryDirectory(prefix="releasekit-base-") as tmp:
            return base_layers(engine, base_id, Path(tmp), keep_layers=False)
    entry = cache_dir / f"{base_id.removeprefix('sha256:')}.json"
    with atomic.entry_lock(entry):
        if entry.is_file():
            try:
                return BaseLayers.model_validate_json(entry.read_text())
            except ValueError:
                pass  # unreadable: saved again below
        atomic.sweep_temporaries(entry)
        with tempfile.TemporaryDirectory(prefix="releasekit-base-") as tmp:
            base = base_layers(engine, base_id, Path(tmp), keep_layers=False)
        atomic.write_bytes(entry, base.model_dump_json().encode("utf-8"))
    return base


def _write_archive(
    archive_out: Path,
    config: bytes,
    config_hex: str,
    diff_ids: list[str],
    layer: Path,
    *,
    base_dir: Path | None,
    mtime: int,
) -> None:
    """A ``docker save``-format tar. Without ``base_dir`` it lists the base layers without carrying
    them: ``docker load`` then reuses the layers the engine already has (it has the base)."""
    layer_paths = [f"{d.split(':')[1]}/layer.tar" for d in diff_ids]
    manifest = [{"Config": f"{config_hex}.json", "RepoTags": None, "Layers": layer_paths}]
    with archive_out.open("wb") as fh, tarfile.open(fileobj=fh, mode="w", format=tarfile.GNU_FORMAT) as tar:

        def add(name: str, data: bytes | None = None, path: Path | None = None) -> None:
            info = tarfile.TarInfo(name)
            info.mtime = mtime
            info.mode = 0o644
            if path is not None:
                info.size = path.stat().st_size
                with path.open("rb") as src:
                    tar.addfile(info, src)
            else:
                info.size = len(data or b"")
                tar.addfile(info, io.BytesIO(data or b""))

        add(f"{config_hex}.json", config)
        if base_dir is not None:
            for diff_id in diff_ids[:-1]:
                add(f"{diff_id.split(':')[1]}/layer.tar", path=base_dir / f"{diff_id.split(':')[1]}.tar")
        add(layer_paths[-1], path=layer)
        add("manifest.json", json.dumps(manifest, separators=(",", ":")).encode())


def assemble(
    engine: Engine,
    *,
    base_id: str,
    layer: Path,
    settings: ImageSettings,
    source_date_epoch: int,
    archive_out: Path | None,
    smoke: SmokeReport,
    base_cache: Path | None = None,
) -> AssembledImage:
    """Make the image (untagged) in the engine; with ``archive_out``, also a self-contained tar of it.

    The image ID is known before anything is loaded (sha256 of the config): when the engine
    already has it, nothing is loaded at all.
    """
    created = rfc3339(source_date_epoch)
    layer_diff = "sha256:" + file_sha256(layer)
    base = cached_base(engine, base_id, base_cache)
    config = image_config(base.config, layer_diff, settings, created, HISTORY_COMMENT)
    config_hex = hashlib.sha256(config).hexdigest()
    image_id = f"sha256:{config_hex}"
    diff_ids = [*base.diff_ids, layer_diff]
    with tempfile.TemporaryDirectory(prefix="releasekit-image-") as tmp:
        work = Path(tmp)
        if archive_out is not None:
            base_layers(engine, base_id, work, keep_layers=True)
            _write_archive(
                archive_out, config, config_hex, diff_ids, layer, base_dir=work, mtime=source_date_epoch
            )
            engine.load(archive_out)
        elif engine.image_id(image_id) != image_id:
            thin = work / "image.tar"
            _write_archive(thin, config, config_hex, diff_ids, layer, base_dir=None, mtime=source_date_epoch)
            engine.load(thin)
    if engine.image_id(image_id) != image_id:
        raise EnvironmentProblem(f"docker load did not produce image {image_id}")
    return AssembledImage(
        image_id=image_id,
        config_digest=image_id,
        layer_digest=layer_diff,
        layer_size=layer.stat().st_size,
        base_size=base.size,
        created=created,
        smoke=smoke,
    )


def _member(tar: tarfile.TarFile, member: str | tarfile.TarInfo) -> IO[bytes]:
    """A regular file of a docker-save tar; anything else means the engine wrote something unexpected."""
    fh = tar.extractfile(member)
    if fh is None:
        raise BuildFailed(f"the saved base image has no regular file {getattr(member, 'name', member)}")
    return fh
