"""Wheel pins at lock time: the wheel that fits the image, from a wheelhouse or fetched by pip.

The image's interpreter is what the manifest's toolchain says (``python``, ``platform``),
never the interpreter running releasekit: a wheel pip picked for the user's own venv
(``cp311``) is not the wheel a ``cp312`` image installs. A wheel that no ``--wheelhouse``
holds is fetched with ``pip download --no-deps --only-binary :all:`` for the image's
Python and platform from the component's ``index_url`` (PyPI when it names none), and
its bytes are hashed.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

import httpx
from packaging.tags import Tag, compatible_tags, cpython_tags, parse_tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from releasekit import atomic
from releasekit.bounded_read import ZIP_MAX_ENTRIES, UnsafeFileError, ZipRefused, open_zip
from releasekit.child_env import child_env
from releasekit.digests import file_sha256
from releasekit.errors import EnvironmentProblem, InputError
from releasekit.findings import Findings, Severity
from releasekit.git.mirrors import is_offline
from releasekit.git.remote import strip_credentials
from releasekit.manifest.models import Toolchain, WheelComponent
from releasekit.simple_index import project_links

PYPI_SIMPLE = "https://pypi.org/simple/"
_PIP_TIMEOUT_S = 900
_MANY = re.compile(r"^(manylinux|musllinux)_([0-9]+)_([0-9]+)_([a-z0-9_]+)$")
# PEP 600's aliases of the older manylinux tags: glibc minor version -> legacy name, the arches it had.
_LEGACY_MANYLINUX = {
    17: ("manylinux2014", {"x86_64", "i686", "aarch64", "armv7l", "ppc64", "ppc64le", "s390x"}),
    12: ("manylinux2010", {"x86_64", "i686"}),
    5: ("manylinux1", {"x86_64", "i686"}),
}


@dataclass(frozen=True)
class ImageInterpreter:
    """The CPython and the platform of the image, as the toolchain names them."""

    python: str  # 3.12
    platform: str  # manylinux_2_39_x86_64

    @property
    def version(self) -> tuple[int, int]:
        major, minor = self.python.split(".")[:2]
        return int(major), int(minor)

    def platforms(self) -> list[str]:
        """Every platform tag the image's pip accepts, most specific first.

        ``manylinux_2_39_x86_64`` accepts every older glibc (``manylinux_2_38`` … ``_2_0``) and
        the legacy aliases (``manylinux2014`` = 2.17, ``manylinux2010`` = 2.12, ``manylinux1``
        = 2.5), and, as pip does on Linux, ``linux_x86_64`` last.
        """
        m = _MANY.match(self.platform)
        if not m:
            return [self.platform]
        family, major, minor, arch = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        found: list[str] = []
        for older in range(minor, -1, -1):
            found.append(f"{family}_{major}_{older}_{arch}")
            legacy = _LEGACY_MANYLINUX.get(older)
            if family == "manylinux" and major == 2 and legacy and arch in legacy[1]:
                found.append(f"{legacy[0]}_{arch}")
        return [*found, f"linux_{arch}"]

    def tags(self) -> list[Tag]:
        """The tags the image's pip installs, in its order of preference (packaging.tags)."""
        interpreter = f"cp{self.version[0]}{self.version[1]}"
        platforms = self.platforms()
        return [
            *cpython_tags(python_version=self.version, platforms=platforms),
            *compatible_tags(python_version=self.version, interpreter=interpreter, platforms=platforms),
        ]

    def describe(self) -> str:
        return f"CPython {self.python}, {self.platform}"


def image_interpreter(toolchain: Toolchain) -> ImageInterpreter | None:
    if toolchain.python and toolchain.platform:
        return ImageInterpreter(python=toolchain.python, platform=toolchain.platform)
    return None


def _parsed(filename: str) -> tuple[str, Version, frozenset[Tag]] | None:
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    return name, version, tags


def is_pinned_wheel(filename: str, comp: WheelComponent) -> bool:
    """A wheel file of exactly the pinned distribution and version (names PEP 503-normalised)."""
    parsed = _parsed(filename)
    if parsed is None or (comp.filename and filename != comp.filename):
        return False
    try:
        pinned = Version(comp.version)
    except InvalidVersion:
        return False
    return parsed[0] == canonicalize_name(comp.distribution) and parsed[1] == pinned


def is_universal(filename: str) -> bool:
    """A pure wheel (``py3-none-any``): it fits every image."""
    parsed = _parsed(filename)
    return parsed is not None and any(
        t.abi == "none" and t.platform == "any" and t.interpreter.startswith("py") for t in parsed[2]
    )


def fit_rank(filename: str, image: ImageInterpreter) -> int | None:
    """Position of the wheel's best tag in the image's preference order; None: it does not fit."""
    parsed = _parsed(filename)
    if parsed is None:
        return None
    ranks = [i for i, tag in enumerate(image.tags()) if tag in parsed[2]]
    return min(ranks) if ranks else None


def wheel_tags(filename: str) -> str:
    parsed = _parsed(filename)
    return ", ".join(sorted(str(t) for t in parsed[2])) if parsed else "unparsable"


def _wheelhouse_candidates(comp: WheelComponent, wheelhouses: list[Path]) -> list[Path]:
    found: list[Path] = []
    for house in wheelhouses:
        if not house.is_dir():
            raise InputError(f"wheelhouse {house} is not a directory")
        found += [p for p in sorted(house.iterdir()) if p.is_file() and is_pinned_wheel(p.name, comp)]
    return found


def _first_pip_error(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return next((ln for ln in lines if ln.startswith("ERROR:")), lines[-1] if lines else "no output")


def pip_download(comp: WheelComponent, index_url: str, image: ImageInterpreter, dest: Path) -> Path:
    """``pip download`` of exactly the pinned wheel for the image's Python and platform into ``dest``.

    ``--isolated``: no pip configuration or PIP_* variable of this host chooses the index or
    the wheel. _PipFailed (with pip's first ERROR line) when pip gets no wheel.
    """
    dest.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--isolated",
        "--disable-pip-version-check",
        "--no-input",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--implementation",
        "cp",
        "--python-version",
        f"{image.version[0]}.{image.version[1]}",
        *[arg for platform in image.platforms() for arg in ("--platform", platform)],
        "--index-url",
        index_url,
        "--dest",
        str(dest),
        f"{comp.distribution}=={comp.version}",
    ]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=_PIP_TIMEOUT_S,
            check=False,
            env=child_env(prefixes=("PIP_",)),
        )
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(
            f"pip download of {comp.requirement} from {strip_credentials(index_url)} took over {_PIP_TIMEOUT_S} s"
        ) from None
    wheels = sorted(p for p in dest.iterdir() if p.name.endswith(".whl"))
    if done.returncode != 0 or len(wheels) != 1:
        raise _PipFailed(_first_pip_error(done.stderr))
    return wheels[0]


class _PipFailed(Exception):
    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


def _listed_wheels(comp: WheelComponent, index_url: str) -> list[str]:
    """The pinned version's wheels the index lists (to name them when none fits the image)."""
    try:
        with httpx.Client(timeout=60, follow_redirects=True) as client:
            _page, links = project_links(client, index_url, comp.distribution)
    except httpx.HTTPError:
        return []
    return sorted(n for n in links if is_pinned_wheel(n, comp))


# Bounds on reading a wheel at lock time: a file handed to plan lock may be anything, so nothing
# is extracted and no member is read past its cap. The largest real wheels (torch, CUDA
# libraries) are a few GB and hold tens of thousands of files.
MAX_WHEEL_BYTES = 16 << 30
MAX_WHEEL_ENTRIES = ZIP_MAX_ENTRIES
MAX_METADATA_BYTES = 16 << 20  # METADATA may carry a long description
MAX_WHEEL_FILE_BYTES = 64 << 10
MAX_RECORD_BYTES = 128 << 20
# Signatures beside RECORD that RECORD cannot list (PEP 427).
_RECORD_UNLISTED = ("RECORD", "RECORD.jws", "RECORD.p7s")


class NotAWheel(Exception):
    """Why a file is not a wheel of the distribution and version its name says (one line)."""


def _member(zf: zipfile.ZipFile, name: str, cap: int) -> bytes:
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise NotAWheel(f"it has no {name}") from None
    if info.file_size > cap:
        raise NotAWheel(f"{name} is {info.file_size} B, over the {cap} B limit")
    try:
        with zf.open(info) as member:
            data = member.read(cap + 1)
    except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError, EOFError) as exc:
        raise NotAWheel(f"{name} cannot be read: {exc}") from None
    if len(data) > cap:
        raise NotAWheel(f"{name} is over the {cap} B limit")
    return data


def _headers(data: bytes, name: str) -> dict[str, list[str]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotAWheel(f"{name} is not UTF-8") from None
    message = HeaderParser().parsestr(text)
    found: dict[str, list[str]] = {}
    for key, value in message.items():
        found.setdefault(key.lower(), []).append(str(value).strip())
    return found


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _is(name_text: str, version_text: str, name: str, version: Version) -> bool:
    """``name_text`` and ``version_text`` name ``name`` ``version`` (PEP 503 names, PEP 440 versions)."""
    try:
        return canonicalize_name(name_text) == name and Version(version_text) == version
    except InvalidVersion:
        return False


def _open_wheel(path: Path) -> zipfile.ZipFile:
    """The zip's directory, read only after the file's type and size are known to be sane and the
    directory was sized from its end record (``bounded_read.open_zip``: entries capped, one name once)."""
    try:
        return open_zip(path, limit=MAX_WHEEL_BYTES, max_entries=MAX_WHEEL_ENTRIES)
    except ZipRefused as exc:
        raise NotAWheel(exc.reason) from None
    except UnsafeFileError as exc:
        raise NotAWheel(str(exc)) from None
    except FileNotFoundError as exc:
        raise NotAWheel(f"cannot be read: {exc.strerror}") from None
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise NotAWheel(f"it is not a zip archive ({exc})") from None


def _dist_info(files: list[str], name: str, version: Version) -> str:
    """The one top-level ``.dist-info`` directory, which must be ``name`` ``version``'s."""
    tops = sorted({f.split("/", 1)[0] for f in files if f.split("/", 1)[0].endswith(".dist-info")})
    if len(tops) != 1:
        raise NotAWheel(f"it has {len(tops)} top-level .dist-info directories, not one")
    dir_name, _, dir_version = tops[0].removesuffix(".dist-info").rpartition("-")
    if not _is(dir_name, dir_version, name, version):
        raise NotAWheel(f"its {tops[0]} is not {name} {version}'s")
    return tops[0]


def _wheel_tags_agree(wheel_bytes: bytes, file_tags: frozenset[Tag]) -> list[tuple[str, str]]:
    """A WHEEL file of version 1.x (else NotAWheel); tags it does not list are a doubt, not a refusal:
    real wheels renamed for another platform tag (ray, mysql-connector-python, playwright as published)
    keep the WHEEL of the build, and pip goes by the file name."""
    wheel = _headers(wheel_bytes, "WHEEL")
    if not (wheel.get("wheel-version") or [""])[0].startswith("1."):
        raise NotAWheel("its WHEEL has no Wheel-Version 1.x")
    declared: set[Tag] = set()
    for value in wheel.get("tag", []):
        try:
            declared |= parse_tag(value)
        except ValueError:
            raise NotAWheel(f"its WHEEL has a malformed Tag {value!r}") from None
    if file_tags <= declared:
        return []
    missing = ", ".join(sorted(str(t) for t in file_tags - declared))
    listed = ", ".join(sorted(str(t) for t in declared)) or "none"
    return [("WHEEL_TAGS_UNDECLARED", f"its WHEEL lists {listed}, not the file name's {missing}")]


def _record_agrees(
    record_bytes: bytes, dist_info: str, files: list[str], read: dict[str, bytes]
) -> list[tuple[str, str]]:
    """RECORD lists every file of the zip and no other (else NotAWheel); a wrong hash for a member
    ``read`` is a doubt (gmsh 4.15.2 as published ships one for its METADATA; pip does not check)."""
    try:
        rows = list(csv.reader(io.StringIO(record_bytes.decode("utf-8"))))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise NotAWheel(f"its RECORD cannot be read: {exc}") from None
    listed = {row[0]: row for row in rows if row}
    unlisted = {f"{dist_info}/{n}" for n in _RECORD_UNLISTED}
    absent = sorted(set(files) - set(listed) - unlisted)
    if absent:
        raise NotAWheel(f"its RECORD does not list {len(absent)} file(s) of the zip, e.g. {absent[0]}")
    extra = sorted(set(listed) - set(files))
    if extra:
        raise NotAWheel(f"its RECORD lists {len(extra)} file(s) the zip lacks, e.g. {extra[0]}")
    return [
        ("WHEEL_RECORD_HASH_MISMATCH", f"its RECORD's hash of {member} is not the file's")
        for member, data in read.items()
        if len(listed[member]) < 2 or listed[member][1] != _record_hash(data)
    ]


def check_wheel_contents(path: Path, distribution: str, version: str) -> list[tuple[str, str]]:
    """``path`` is a wheel (PEP 427) of ``distribution`` ``version``: its name, dist-info METADATA,
    WHEEL and RECORD all say so. Raises NotAWheel with the first disagreement; returns the doubts
    (code, message) that real published wheels have: WHEEL tags that are not the file name's, a
    RECORD hash of METADATA or WHEEL that is not the file's.

    Only the zip's directory and three small members are read, each under its cap.
    """
    parsed = _parsed(path.name)
    if parsed is None:
        raise NotAWheel("its file name is not a wheel's (name-version-python-abi-platform.whl)")
    name, file_version, file_tags = parsed
    if (name, file_version) != (canonicalize_name(distribution), Version(version)):
        raise NotAWheel(f"its file name says {name} {file_version}")
    with _open_wheel(path) as zf:
        files = [i.filename for i in zf.infolist() if not i.is_dir()]
        info = _dist_info(files, name, file_version)
        metadata_bytes = _member(zf, f"{info}/METADATA", MAX_METADATA_BYTES)
        metadata = _headers(metadata_bytes, "METADATA")
        meta_name = (metadata.get("name") or [""])[0]
        meta_version = (metadata.get("version") or [""])[0]
        if not _is(meta_name, meta_version, name, file_version):
            raise NotAWheel(
                f"its METADATA says Name {meta_name or '(none)'}, Version {meta_version or '(none)'}"
            )
        wheel_bytes = _member(zf, f"{info}/WHEEL", MAX_WHEEL_FILE_BYTES)
        doubts = _wheel_tags_agree(wheel_bytes, file_tags)
        record_bytes = _member(zf, f"{info}/RECORD", MAX_RECORD_BYTES)
        read = {f"{info}/METADATA": metadata_bytes, f"{info}/WHEEL": wheel_bytes}
        return doubts + _record_agrees(record_bytes, info, files, read)


def verified_wheel(name: str, comp: WheelComponent, path: Path, findings: Findings) -> PinnedWheel:
    """``path`` as the pin, once it is shown to be a wheel of the pinned distribution and version
    (its doubts are warnings in ``findings``)."""
    try:
        doubts = check_wheel_contents(path, comp.distribution, comp.version)
    except NotAWheel as why:
        raise InputError(f"{name}: {path.name} is not a wheel of {comp.requirement}: {why}") from None
    for code, message in doubts:
        findings.add(code, f"{path.name}: {message}", severity=Severity.warning, component=name)
    return PinnedWheel(filename=path.name, sha256=file_sha256(path))


@dataclass(frozen=True)
class PinnedWheel:
    filename: str
    sha256: str


def pinned_wheel(
    name: str,
    comp: WheelComponent,
    wheelhouses: list[Path],
    image: ImageInterpreter | None,
    findings: Findings,
    *,
    download_dir: Path | None = None,
) -> PinnedWheel | None:
    """The wheel a pin locks to: the best-fitting one of the wheelhouses, else pip's choice from the index.

    None when the index has the pinned version only for other Pythons or platforms (one
    WHEEL_TAGS_MISMATCH finding naming what it has).
    """
    candidates = _wheelhouse_candidates(comp, wheelhouses)
    if candidates:
        return _from_wheelhouse(name, comp, candidates, image, findings)
    index_url = comp.index_url or PYPI_SIMPLE
    shown = strip_credentials(index_url)
    if image is None:
        where = ", ".join(str(h) for h in wheelhouses) or "no --wheelhouse given"
        raise InputError(
            f"{name}: no wheel for {comp.requirement} in a wheelhouse ({where}); fetching it from {shown} needs "
            "toolchain.python and toolchain.platform (the image's, e.g. 3.12 and manylinux_2_39_x86_64)"
        )
    if is_offline():
        raise InputError(
            f"{name}: offline: no wheel for {comp.requirement} in a wheelhouse, and {shown} is not read "
            "offline (give --wheelhouse DIR)"
        )
    with tempfile.TemporaryDirectory(prefix="releasekit-wheel-") as tmp:
        try:
            fetched = pip_download(comp, index_url, image, Path(tmp))
        except _PipFailed as failed:
            listed = _listed_wheels(comp, index_url)
            if listed and all(fit_rank(n, image) is None for n in listed):
                # The version is there, built for other Pythons or platforms: a finding, not a broken input.
                findings.add(
                    "WHEEL_TAGS_MISMATCH",
                    f"no wheel of {comp.requirement} at {shown} fits the image ({image.describe()}); "
                    f"it has {', '.join(wheel_tags(n) for n in listed)}",
                    component=name,
                )
                return None
            raise InputError(
                f"{name}: pip download of {comp.requirement} from {shown}: {failed.line}"
            ) from None
        if comp.filename and fetched.name != comp.filename:
            raise InputError(
                f"{name}: pip chose {fetched.name} for {image.describe()}, the manifest names {comp.filename}"
            )
        pinned = verified_wheel(name, comp, fetched, findings)
        if download_dir is not None:
            download_dir.mkdir(parents=True, exist_ok=True)
            atomic.copy_file(fetched, download_dir / fetched.name)  # two locks at once: never a torn wheel
    return pinned


def _from_wheelhouse(
    name: str,
    comp: WheelComponent,
    candidates: list[Path],
    image: ImageInterpreter | None,
    findings: Findings,
) -> PinnedWheel:
    """One wheel among the wheelhouses' matches, chosen as pip would; two that cannot be told apart is bad input."""
    if image is not None and len(candidates) > 1:
        fitting = [p for p in candidates if fit_rank(p.name, image) is not None]
        # pip's own choice among wheels that fit: the best-ranked tag. None fits: the first,
        # which the lock's WHEEL_TAGS_MISMATCH then names.
        candidates = sorted(fitting, key=lambda p: (fit_rank(p.name, image), p.name))[:1] or candidates[:1]
    names = sorted({p.name for p in candidates})
    if len(names) > 1:
        raise InputError(
            f"{name}: {len(names)} wheels match {comp.requirement} ({', '.join(names)}); "
            "name one with 'filename', or give the toolchain python and platform"
        )
    return verified_wheel(name, comp, candidates[0], findings)
