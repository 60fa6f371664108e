"""The image's SBOM (CycloneDX 1.6 JSON, through ``cyclonedx-python-lib``), made from what verify-provenance verified.

Nothing here is guessed by scanning: every entry comes from the inventory the verifier read and
checked (``VerifyContext``), and the SBOM is written only when that verification passed.

- **Python distributions** (every ``.dist-info`` on the image's site directories): name, version,
  purl ``pkg:pypi/<name>@<version>``, the sha256 of the installed ``RECORD`` (which holds the
  sha256 of every file it lists, each checked against the image by the ``records`` check) and, for
  a locked component, the sha256 of its wheel (the verifier's own rebuild, or the lock's pin),
  the repository as a ``vcs`` external reference and the commit and tree as properties.
- **Files a RECORD does not vouch for by hash** (RECORD itself, ``INSTALLER``, ``.pyc`` caches):
  a ``releasekit:file`` property ``<sha256>  <path>`` of the distribution that owns them.
- **Debian packages** (dpkg's ``status``): purl ``pkg:deb/debian/<name>@<version>?arch=<arch>``,
  and every file dpkg's ``<package>.list`` gives them as a ``releasekit:file`` property.
- **Every other file** (no RECORD, no dpkg list: what the base image shipped outside a package
  manager): a ``releasekit:file`` property of the image (``metadata.component``). Symlinks and
  hard links are ``releasekit:symlink`` / ``releasekit:hardlink`` ``<path> -> <target>``;
  directories are not listed.

Deterministic: the serial number is ``sbom_serial(image ID)`` (uuid5), the timestamp is the
image's own ``Created`` (the locked commit time, ``SOURCE_DATE_EPOCH``), and the library sorts
components, hashes and properties; the same image verified again gives the same bytes.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from cyclonedx.model import (
    ExternalReference,
    ExternalReferenceType,
    HashAlgorithm,
    HashType,
    Property,
    XsUri,
)
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output.json import JsonV1Dot6
from packageurl import PackageURL

from releasekit import __version__
from releasekit.atomic import write_atomic
from releasekit.provenance.context import VerifyContext
from releasekit.provenance.inventory import FileEntry, Inventory
from releasekit.records.lock import LockedGitComponent, LockedWheelComponent
from releasekit.records.sbom import sbom_serial

_DPKG_INFO = "/var/lib/dpkg/info/"
_LISTED = ("file", "symlink", "hardlink")  # entry kinds the SBOM lists (directories and devices are not)


def _prop(name: str, value: str) -> Property:
    return Property(name=f"releasekit:{name}", value=value)


def _sha256(hex_digest: str) -> HashType:
    return HashType(alg=HashAlgorithm.SHA_256, content=hex_digest)


def file_property(path: str, entry: FileEntry) -> Property:
    """One file as the verifier read it: ``<sha256>  <path>`` (``sha256sum``'s line), or a link and its target.

    A property, not a ``file`` component: the library builds and sorts components at about 1 ms each,
    which for the 10,000 files of a base image cost more than the whole verification (docs/benchmarks.md).
    """
    if entry.kind == "file":
        digest = entry.sha256.hex() if entry.sha256 is not None else "-" * 64
        return _prop("file", f"{digest}  {path}")
    return _prop(entry.kind, f"{path} -> {entry.link}")


@dataclass
class DebPackage:
    name: str
    version: str
    arch: str
    files: list[str] = field(default_factory=list)


def deb_packages(inv: Inventory) -> dict[str, DebPackage]:
    """Installed packages from dpkg's ``status`` (key ``name`` or ``name:arch``, as the .list files are named)."""
    status = inv.contents.get("/var/lib/dpkg/status", b"").decode("utf-8", errors="replace")
    out: dict[str, DebPackage] = {}
    for stanza in status.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line and not line[0].isspace() and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if not fields.get("Package") or not fields.get("Status", "").endswith(" installed"):
            continue
        pkg = DebPackage(fields["Package"], fields.get("Version", ""), fields.get("Architecture", ""))
        multi = fields.get("Multi-Arch") == "same"
        out[f"{pkg.name}:{pkg.arch}" if multi else pkg.name] = pkg
    for path, data in sorted(inv.contents.items()):
        if not (path.startswith(_DPKG_INFO) and path.endswith(".list")):
            continue
        pkg_found = out.get(path[len(_DPKG_INFO) : -len(".list")])
        if pkg_found is None:
            continue
        for line in data.decode("utf-8", errors="replace").splitlines():
            if line.startswith("/"):
                pkg_found.files.append(inv.resolve(line, follow_last=False) or line)
    return out


@dataclass
class _Owners:
    """Who vouches for each listed path: a distribution (by its dist-info) or a Debian package."""

    dist: dict[str, str] = field(default_factory=dict)  # path -> dist-info of a RECORD without its hash
    deb: dict[str, str] = field(default_factory=dict)  # path -> package key
    vouched: set[str] = field(default_factory=set)  # paths a RECORD row's sha256 covers


def _owners(ctx: VerifyContext, debs: dict[str, DebPackage]) -> _Owners:
    owners = _Owners()
    for key, pkg in debs.items():
        for path in pkg.files:
            owners.deb.setdefault(path, key)
    for dist in ctx.dists:
        for path, row in dist.files.items():
            if row.algorithm == "sha256" and row.digest:
                owners.vouched.add(path)
            else:
                owners.dist.setdefault(path, dist.dist_info)
    return owners


def _cache_owner(path: str, owners: _Owners, ctx: VerifyContext) -> tuple[str, str] | None:
    """A ``__pycache__/*.pyc`` no list names belongs to whoever owns its source."""
    directory, name = posixpath.split(path)
    if posixpath.basename(directory) != "__pycache__" or not name.endswith(".pyc"):
        return None
    source = posixpath.join(posixpath.dirname(directory), name.split(".", 1)[0] + ".py")
    if source in owners.deb:
        return "deb", owners.deb[source]
    owner = ctx.owner_of(source)
    return ("dist", owner.dist_info) if owner is not None else None


def place_files(
    ctx: VerifyContext, owners: _Owners
) -> tuple[dict[str, list[Property]], dict[str, list[Property]], list[Property]]:
    """Every listed entry of the image, as (files per dist-info, files per package, files of no package)."""
    by_dist: dict[str, list[Property]] = {}
    by_deb: dict[str, list[Property]] = {}
    loose: list[Property] = []
    for path, entry in ctx.inventory.files.items():
        if entry.kind not in _LISTED or path in owners.vouched:
            continue
        comp = file_property(path, entry)
        if path in owners.dist:
            by_dist.setdefault(owners.dist[path], []).append(comp)
        elif path in owners.deb:
            by_deb.setdefault(owners.deb[path], []).append(comp)
        elif (cached := _cache_owner(path, owners, ctx)) is not None:
            (by_dist if cached[0] == "dist" else by_deb).setdefault(cached[1], []).append(comp)
        else:
            loose.append(comp)
    return by_dist, by_deb, loose


def _vcs(repo: str, commit: str | None, tree: str | None) -> tuple[list[ExternalReference], list[Property]]:
    refs = [ExternalReference(type=ExternalReferenceType.VCS, url=XsUri(repo), comment=f"commit {commit}")]
    props = [_prop("vcs:repository", repo)]
    props += [_prop("vcs:commit", commit)] if commit else []
    props += [_prop("vcs:tree", tree)] if tree else []
    return refs, props


def _locked_facts(
    ctx: VerifyContext, name: str
) -> tuple[str | None, list[ExternalReference], list[Property]]:
    """(wheel sha256, external references, properties) of the locked component ``name``."""
    locked = ctx.lock.components[name]
    rebuilt = {c.name: c for c in (ctx.reproduction.components if ctx.reproduction else [])}.get(name)
    props = [_prop("component", name)]
    if isinstance(locked, LockedWheelComponent):
        refs: list[ExternalReference] = []
        if locked.source is not None:
            refs, more = _vcs(locked.source.repo, locked.source.commit, None)
            props += more
        return locked.sha256, refs, props
    assert isinstance(locked, LockedGitComponent)
    refs, more = _vcs(locked.repo, locked.commit, locked.tree)
    props += more
    props += [_prop("vcs:pull-request", f"#{pr.number} {pr.head} {pr.role}") for pr in locked.pull_requests]
    return (rebuilt.wheel_sha256 if rebuilt is not None else None), refs, props


def dist_components(ctx: VerifyContext, by_dist: dict[str, list[Property]]) -> list[Component]:
    """One ``library`` component per installed distribution."""
    locked_by_dist: dict[str, str] = {}
    for name, comp in ctx.components.items():
        dist = ctx.dist_for(comp) if comp.installed else None
        if dist is not None:
            locked_by_dist[dist.dist_info] = name
    out: list[Component] = []
    for dist in ctx.dists:
        record = ctx.inventory.files.get(f"{dist.dist_info}/RECORD")
        props = [_prop("dist-info", dist.dist_info)]
        if record is not None and record.sha256 is not None:
            props.append(_prop("record:sha256", record.sha256.hex()))
        hashes: list[HashType] = []
        refs: list[ExternalReference] = []
        if dist.dist_info in locked_by_dist:
            wheel, refs, more = _locked_facts(ctx, locked_by_dist[dist.dist_info])
            hashes = [_sha256(wheel)] if wheel else []
            props += more
        out.append(
            Component(
                type=ComponentType.LIBRARY,
                name=dist.name,
                version=dist.version,
                bom_ref=f"pypi:{dist.dist_info}",
                purl=PackageURL(type="pypi", name=dist.key, version=dist.version or None),
                hashes=hashes,
                external_references=refs,
                properties=[*props, *by_dist.get(dist.dist_info, [])],
            )
        )
    return out


def deb_components(debs: dict[str, DebPackage], by_deb: dict[str, list[Property]]) -> list[Component]:
    return [
        Component(
            type=ComponentType.LIBRARY,
            name=pkg.name,
            version=pkg.version,
            bom_ref=f"deb:{key}",
            purl=PackageURL(
                type="deb",
                namespace="debian",
                name=pkg.name,
                version=pkg.version or None,
                qualifiers={"arch": pkg.arch} if pkg.arch else None,
            ),
            properties=by_deb.get(key, []),
        )
        for key, pkg in sorted(debs.items())
    ]


def image_created(created: str | None) -> datetime:
    """The image config's ``Created`` (RFC 3339, up to nanoseconds) as a datetime; the epoch when absent."""
    if not created:
        return datetime.fromtimestamp(0, UTC)
    text = created.replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:  # Python reads at most microseconds
        digits = "".join(c for c in rest if c.isdigit())
        text = f"{head}.{digits[:6]}{rest[len(digits) :]}"
    return datetime.fromisoformat(text).astimezone(UTC)


def make_bom(ctx: VerifyContext, created: str | None) -> Bom:
    """The SBOM of the verified image (only call it for an image that verified)."""
    debs = deb_packages(ctx.inventory)
    owners = _owners(ctx, debs)
    by_dist, by_deb, loose = place_files(ctx, owners)
    image = Component(
        type=ComponentType.CONTAINER,
        name=(ctx.image.tags[0].rsplit(":", 1)[0] if ctx.image.tags else "image"),
        version=ctx.image.id,
        bom_ref=ctx.image.id,
        hashes=[_sha256(ctx.image.id.removeprefix("sha256:"))],
        properties=loose,  # the files no package owns
    )
    components: list[Component] = [*dist_components(ctx, by_dist), *deb_components(debs, by_deb)]
    base = ctx.reproduction.base if ctx.reproduction is not None else None
    if base is not None:
        components.append(
            Component(
                type=ComponentType.CONTAINER,
                name=base.name,
                version=base.image_id,
                bom_ref=f"base:{base.image_id}",
                properties=[_prop("role", "base image")]
                + ([_prop("digest", base.digest)] if base.digest else []),
            )
        )
    bom = Bom(
        serial_number=sbom_serial(ctx.image.id),
        version=1,
        metadata=BomMetaData(
            timestamp=image_created(created),
            component=image,
            properties=[
                _prop("lock:sha256", ctx.lock_sha256),
                _prop("manifest:sha256", ctx.lock.manifest.sha256),
                _prop("verified-by", f"releasekit {__version__} verify-provenance"),
            ],
        ),
        components=components,
    )
    bom.register_dependency(image, components)  # the image holds each of them (files nest in their owner)
    return bom


def sbom_text(bom: Bom) -> str:
    return JsonV1Dot6(bom).output_as_string(indent=2) + "\n"


def write_sbom(ctx: VerifyContext, created: str | None, path: Path) -> str:
    """Write the SBOM (``atomic.write_atomic``: a new temporary file, fsync, rename; a link at ``path`` is
    refused, so nothing outside the release directory is written); returns the text written."""
    text = sbom_text(make_bom(ctx, created))
    write_atomic(path, text)
    return text
