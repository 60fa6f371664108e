"""Wheel-pinned components: taken as files from a wheelhouse or a simple index, refused on hash mismatch."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from urllib.parse import urljoin

import httpx
from packaging.utils import canonicalize_name

from releasekit.bounded_read import WHEEL_MAX_BYTES, open_regular
from releasekit.digests import file_sha256
from releasekit.errors import BuildFailed, EnvironmentProblem, InputError
from releasekit.git.mirrors import is_offline
from releasekit.git.remote import strip_credentials
from releasekit.records.lock import LockedWheelComponent
from releasekit.simple_index import project_links


def _from_index(comp: LockedWheelComponent, index_url: str, dest: Path) -> None:
    shown = strip_credentials(f"{index_url.rstrip('/')}/{canonicalize_name(comp.distribution)}/")
    if is_offline():
        raise InputError(
            f"{comp.name}: offline: {comp.filename} is in no --wheelhouse, and {shown} is not read offline"
        )
    try:
        with httpx.Client(timeout=60, follow_redirects=True) as client:
            page, links = project_links(client, index_url, comp.distribution)
            href = links.get(comp.filename)
            if href is None:
                raise InputError(f"{comp.name}: {comp.filename} is not listed at {shown}")
            with client.stream("GET", urljoin(page, href)) as resp, dest.open("wb") as fh:
                resp.raise_for_status()
                for chunk in resp.iter_bytes():
                    fh.write(chunk)
    except httpx.HTTPError as exc:
        raise EnvironmentProblem(f"{comp.name}: cannot fetch {comp.filename} from {shown}: {exc}") from None


def fetch_pinned_wheel(
    comp: LockedWheelComponent, wheelhouses: list[Path], index_url: str | None, dest_dir: Path
) -> Path:
    """Copy the locked wheel into ``dest_dir``; BuildFailed (exit 1) when its sha256 is not the locked one."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / comp.filename
    if not re.fullmatch(r"[A-Za-z0-9_.+!-]+\.whl", comp.filename):
        raise InputError(
            f"{comp.name}: locked wheel filename {comp.filename!r} is not a plain wheel file name"
        )
    source = next((h / comp.filename for h in wheelhouses if (h / comp.filename).is_file()), None)
    if source is not None:
        # A regular file under the wheel limit only (a wheelhouse may be a release directory's wheels/).
        with open(open_regular(source, limit=WHEEL_MAX_BYTES), "rb") as src, dest.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    elif index_url:
        _from_index(comp, index_url, dest)
    else:
        where = ", ".join(str(h) for h in wheelhouses) or "no --wheelhouse given"
        raise InputError(f"{comp.name}: {comp.filename} not found ({where})", hint="pass --wheelhouse DIR")
    actual = file_sha256(dest)
    if actual != comp.sha256:
        dest.unlink()
        raise BuildFailed(f"{comp.name}: {comp.filename} has sha256 {actual}, the lock pins {comp.sha256}")
    return dest
