"""The image filesystem's tar reader against Python's tarfile, and its refusals of what tarfile lets pass."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path

import pytest

from releasekit.provenance.accounting import Expected, table
from releasekit.provenance.hasher import HashingError
from releasekit.provenance.hashthread import THREAD_NAME, HashThread
from releasekit.provenance.inventory import ReadPlan, inventory_from_tar, safe_member_path
from releasekit.provenance.tarstream import ExportAborted


def _reference(data: bytes) -> dict[str, Expected]:
    """The table as tarfile reads it (the reader this one replaced)."""
    out: dict[str, Expected] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for m in tar:
            path = safe_member_path(m.name)
            assert path is not None
            mode = m.mode & 0o7777
            if m.issym():
                out[path] = Expected("symlink", mode, m.uid, m.gid, m.linkname, None, 0)
            elif m.islnk():
                target = out[safe_member_path(m.linkname) or ""]
                out[path] = Expected("file", mode, m.uid, m.gid, None, target.sha256, target.size)
            elif m.isdir():
                out[path] = Expected("dir", mode, m.uid, m.gid, None, None, 0)
            elif m.isreg():
                body = tar.extractfile(m)
                assert body is not None
                out[path] = Expected(
                    "file", mode, m.uid, m.gid, None, hashlib.sha256(body.read()).hexdigest(), m.size
                )
            else:
                kind = "chr" if m.ischr() else "blk" if m.isblk() else "fifo"
                out[path] = Expected(
                    kind,
                    mode,
                    m.uid,
                    m.gid,
                    f"{m.devmajor}:{m.devminor}" if kind != "fifo" else None,
                    None,
                    0,
                )
    return out


def _ours(data: bytes, chunk: int = 7001, **plan: int) -> dict[str, Expected]:
    pieces = (data[i : i + chunk] for i in range(0, len(data), chunk))
    return table(
        inventory_from_tar(pieces, ReadPlan(python_roots=[], hash_all=True, max_kept_bytes=0, **plan))
    )


def _build(fmt: int, *, big_ids: bool = False) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:

        def add(info: tarfile.TarInfo, body: bytes | None = None) -> None:
            if big_ids:
                info.uid, info.gid = 3_000_000_000, 70_000  # base-256 in GNU format, pax records in pax
            tar.addfile(info, io.BytesIO(body) if body is not None else None)

        d = tarfile.TarInfo("usr/lib")
        d.type, d.mode = tarfile.DIRTYPE, 0o755
        add(d)
        long_dir = "usr/lib/" + "d" * 120 + "/" + "e" * 130
        for name, body in (
            ("usr/lib/a.txt", b"hello\n"),
            (long_dir + "/file.bin", os.urandom(70_000)),
            ("usr/lib/empty", b""),
            ("usr/lib/ünï.py", b"x = 1\n"),
        ):
            f = tarfile.TarInfo(name)
            f.size, f.mode, f.uid, f.gid = len(body), 0o4755, 1000, 1001
            add(f, body)
        for name, target, kind in (
            ("usr/lib/sym", "/etc/" + "t" * 150, tarfile.SYMTYPE),
            ("usr/lib/hard", long_dir + "/file.bin", tarfile.LNKTYPE),
        ):
            link = tarfile.TarInfo(name)
            link.type, link.linkname = kind, target
            add(link)
        for name, kind in (
            ("dev/null", tarfile.CHRTYPE),
            ("dev/sda", tarfile.BLKTYPE),
            ("run/fifo", tarfile.FIFOTYPE),
        ):
            dev = tarfile.TarInfo(name)
            dev.type, dev.devmajor, dev.devminor = kind, 8, 3
            add(dev)
    return buf.getvalue()


@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_same_table_as_tarfile_for_long_names_links_and_devices(fmt):
    if fmt == tarfile.USTAR_FORMAT:
        with pytest.raises(ValueError):  # ustar cannot hold the long names: only GNU and pax are built
            _build(fmt)
        return
    data = _build(fmt, big_ids=True)
    assert _ours(data) == _reference(data)
    assert _ours(data, 512) == _ours(data, 1 << 20)


def test_same_table_as_tarfile_on_a_real_tar(tmp_path: Path):
    import subprocess
    import sysconfig

    # The interpreter's standard library (thousands of small files, a few large ones), not the
    # installed packages: their size depends on the machine (1.3 GB here, most of the test's time).
    tree = Path(sysconfig.get_paths()["stdlib"])
    out = tmp_path / "t.tar"
    # GNU tar, as an export writes it: a whole real tree.
    subprocess.run(
        ["tar", "--sort=name", "-cf", str(out), "-C", str(tree)]
        + ["--exclude=./site-packages", "--exclude=./dist-packages", "."],
        check=True,
        stderr=subprocess.DEVNULL,
    )
    data = out.read_bytes()
    ours = _ours(data, 1 << 20, hash_thread_bytes=0)
    assert len(ours) > 1000
    assert ours == _reference(data)
    # The same with the larger files hashed on a thread of this process, through a ring small
    # enough that pieces wrap around and the reader waits for room.
    assert _ours(data, 1 << 20, hash_thread_bytes=64 * 1024, hash_thread_ring_bytes=256 * 1024) == ours


def _big_tree() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for i, size in enumerate([0, 100, 70_000, 300_000, 3_000_000, 65_536, 1_500_000]):
            info = tarfile.TarInfo(f"venv/lib/python3.11/site-packages/pkg/m{i}.py")
            info.size = size
            tar.addfile(info, io.BytesIO(os.urandom(size)))
        link = tarfile.TarInfo("venv/lib/python3.11/site-packages/pkg/again.py")
        link.type, link.linkname = tarfile.LNKTYPE, "venv/lib/python3.11/site-packages/pkg/m4.py"
        tar.addfile(link)
        for name, size in (("venv/bin/tool", 100), ("venv/lib/python3.11/site-packages/pkg/data.bin", 2000)):
            info = tarfile.TarInfo(name)  # files after a hard link, on the reader's own small-file path
            info.size = size
            tar.addfile(info, io.BytesIO(os.urandom(size)))
    return buf.getvalue()


def _tarfile_digests(data: bytes) -> dict[str, bytes]:
    """Every regular file's sha256 as the standard library's tarfile reads it (an independent reference)."""
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar:
            if member.isfile():
                handle = tar.extractfile(member)
                assert handle is not None
                out["/" + member.name] = hashlib.sha256(handle.read()).digest()
            elif member.islnk():
                out["/" + member.name] = out["/" + member.linkname]
    return out


def _hash_threads() -> list[str]:
    """Hashing threads still alive a moment after the read (a finished one unmaps its ring on its way out)."""
    import threading

    for thread in threading.enumerate():
        if thread.name == THREAD_NAME:
            thread.join(timeout=10)
    return [t.name for t in threading.enumerate() if t.name == THREAD_NAME]


@pytest.mark.parametrize("chunk", [4096, 1 << 20])
def test_the_hashing_thread_gives_the_same_digests_and_blob_ids(chunk):
    data = _big_tree()
    plan = {
        "python_roots": ["/venv/lib/python3.11/site-packages"],
        "hash_all": True,
        "max_kept_bytes": 0,
    }
    here = inventory_from_tar([data], ReadPlan(**plan, hash_thread_bytes=0))
    threaded = inventory_from_tar(
        (data[i : i + chunk] for i in range(0, len(data), chunk)),
        ReadPlan(**plan, hash_thread_bytes=64 * 1024),
    )
    assert {p: e.sha256 for p, e in threaded.files.items() if e.kind == "file"} == _tarfile_digests(data)
    for path, entry in here.files.items():
        assert (threaded.files[path].sha256, threaded.files[path].blob) == (entry.sha256, entry.blob), path
    # The hard link to a thread-hashed file has its digests too, whenever the thread finished it.
    big = here.files["/venv/lib/python3.11/site-packages/pkg/m4.py"]
    assert (
        big.blob is not None
        and threaded.files["/venv/lib/python3.11/site-packages/pkg/again.py"].blob == big.blob
    )
    assert not _hash_threads()
    with pytest.raises(ExportAborted, match="truncated"):  # cut inside a file the thread is hashing
        inventory_from_tar([data[: len(data) // 2]], ReadPlan(**plan, hash_thread_bytes=64 * 1024))
    assert not _hash_threads()


@pytest.mark.parametrize(
    ("ring", "piece", "post"),
    [(16 * 1024, 4096, 8192), (10_000, 4096, 8192), (10_000, 30_000, 8192), (8 << 20, 1 << 20, 4 << 20)],
)
def test_the_hashing_thread_bounds_what_waits_and_reports_a_failure(ring, piece, post):
    # Rings that wrap many times, end mid-piece (10,000 bytes), are smaller than one piece, or
    # are larger than the thread's faulting steps (the writer takes parts the thread has not reached).
    got: list[tuple[bytes, bytes]] = []
    bodies = [os.urandom(n) for n in (256 * 1024, 5, 70_001, 12 << 20)]
    worker = HashThread(1, ring, None, post_bytes=post)
    worker.prepare()
    for body in bodies:
        assert worker.begin(len(body), True, lambda sha, sha1: got.append((sha, sha1)))
        view = memoryview(body)
        for at in range(0, len(body), piece):
            worker.write(view[at : at + piece])
            assert worker._used <= ring
        worker.end()
    worker.close()
    assert got == [
        (hashlib.sha256(b).digest(), hashlib.sha1(b"blob %d\0" % len(b) + b).digest()) for b in bodies
    ]
    assert not _hash_threads()
    failing = HashThread(1, 16 * 1024, None)
    assert failing.begin(3, False, lambda sha, sha1: 1 / 0)
    failing.write(b"abc")
    failing.end()
    with pytest.raises(HashingError, match="hashing thread failed"):
        failing.close()
    failing.abort()
    assert not _hash_threads()
    assert not HashThread(0, 1, None).begin(10**9, False, lambda sha, sha1: None)  # 0: never


def test_the_writer_waits_for_the_part_of_the_ring_the_thread_is_faulting_in(monkeypatch, tmp_path):
    # The thread faults the ring in from a FIFO this test holds back: it sits inside its first
    # faulting step until the test lets 64 KiB of zeros through. A writer that did not wait for
    # that step would have its bytes zeroed under it, and the digest would say so.
    import threading
    import time

    from releasekit.provenance import hashthread

    fifo = tmp_path / "zeros"
    os.mkfifo(fifo)
    monkeypatch.setattr(hashthread, "ZERO_SOURCE", str(fifo))
    writer_done = threading.Event()
    waited: list[bool] = []

    def feed() -> None:
        with open(fifo, "wb") as out:
            time.sleep(0.2)
            waited.append(not writer_done.is_set())  # the writer is still waiting for the faulting step
            out.write(bytes(64 * 1024))

    feeder = threading.Thread(target=feed)
    feeder.start()
    got: list[bytes] = []
    body = os.urandom(1 << 20)
    worker = HashThread(1, 4 << 20, None)
    try:
        assert worker.begin(
            len(body), False, lambda sha, sha1: got.append(sha)
        )  # maps the ring, starts the thread
        time.sleep(0.05)  # the thread has claimed its first step and blocks reading the FIFO
        worker.write(memoryview(body))
        writer_done.set()
        worker.end()
        worker.close()
    finally:
        feeder.join(timeout=10)
        worker.abort()
    assert waited == [True]
    assert got == [hashlib.sha256(body).digest()]
    assert not _hash_threads()


def test_without_a_zero_source_the_thread_still_hashes(monkeypatch, tmp_path):
    from releasekit.provenance import hashthread

    monkeypatch.setattr(
        hashthread, "ZERO_SOURCE", str(tmp_path / "absent")
    )  # faulting in is only a head start
    data = _big_tree()
    plan = {"python_roots": [], "hash_all": True, "max_kept_bytes": 0}
    threaded = inventory_from_tar([data], ReadPlan(**plan, hash_thread_bytes=64 * 1024))
    assert {p: e.sha256 for p, e in threaded.files.items() if e.kind == "file"} == _tarfile_digests(data)
    assert not _hash_threads()


def _headers(data: bytes) -> int:
    return data.index(b"hello\n") - 512  # the a.txt header


def test_bad_checksum_is_refused():
    data = bytearray(_build(tarfile.PAX_FORMAT))
    at = _headers(bytes(data))
    data[at + 1] ^= 0x01
    with pytest.raises(ExportAborted, match="checksum"):
        _ours(bytes(data))


@pytest.mark.parametrize("where", ["header", "data", "no-end-marker"])
def test_truncated_stream_is_refused(where):
    data = _build(tarfile.GNU_FORMAT)
    last = len(data.rstrip(b"\0"))
    cut = {"header": 100, "data": _headers(data) + 512 + 3, "no-end-marker": last + -last % 512}[where]
    with pytest.raises(ExportAborted, match="truncated"):
        _ours(data[:cut])


def test_not_a_tar_and_trailing_data_are_refused():
    with pytest.raises(ExportAborted, match="not a tar"):
        _ours(b"\x01" * 2048)
    with pytest.raises(ExportAborted):
        _ours(b"")
    data = _build(tarfile.GNU_FORMAT)
    with pytest.raises(ExportAborted, match="follows the end"):
        _ours(data + b"hidden")


def _one(info: tarfile.TarInfo, body: bytes = b"", fmt: int = tarfile.GNU_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        tar.addfile(info, io.BytesIO(body))
    return buf.getvalue()


def test_unknown_sparse_and_data_carrying_types_are_refused():
    for kind in (b"S", b"V", b"M", b"D", b"Z"):
        info = tarfile.TarInfo("x")
        info.size = 1024
        raw = bytearray(_one(info, b"\0" * 1024))
        raw[156:157] = kind
        raw[148:156] = b"        "
        raw[148:155] = b"%06o\0" % (sum(raw[:512]) & 0o777777)
        with pytest.raises(ExportAborted, match="sparse|unknown entry type"):
            _ours(bytes(raw))
    # a symlink header that carries data tarfile would read as the next header
    raw = bytearray(_one(tarfile.TarInfo("x"), b""))
    raw[156:157] = b"2"
    raw[124:136] = b"%011o\0" % 512
    raw[148:156] = b"        "
    raw[148:155] = b"%06o\0" % sum(raw[:512])
    with pytest.raises(ExportAborted, match="carries 512 bytes"):
        _ours(bytes(raw[:512]) + bytes(512) + bytes(1024))
    # pax sparse records, and a global header that renames every entry
    info = tarfile.TarInfo("x")
    info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0"}
    with pytest.raises(ExportAborted, match="sparse"):
        _ours(_one(info, fmt=tarfile.PAX_FORMAT))
    buf = io.BytesIO()
    with tarfile.open(
        fileobj=buf, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"path": "etc/passwd"}
    ) as tar:
        tar.addfile(tarfile.TarInfo("x"), io.BytesIO(b""))
    with pytest.raises(ExportAborted, match="global pax header"):
        _ours(buf.getvalue())


def test_non_octal_number_is_refused():
    raw = bytearray(_one(tarfile.TarInfo("x")))
    raw[100:108] = b"00-0644\0"
    raw[148:156] = b"        "
    raw[148:155] = b"%06o\0" % sum(raw[:512])
    with pytest.raises(ExportAborted, match="mode field is not an octal"):
        _ours(bytes(raw))


def test_the_plan_makes_the_one_hasher_and_the_reader_hashes_in_line_below_it():
    thread = ReadPlan(python_roots=[], hash_thread_bytes=7).hasher()
    never = ReadPlan(python_roots=[], hash_thread_bytes=0).hasher()
    try:
        assert isinstance(thread, HashThread) and thread.min_bytes == 7
        assert not thread.begin(6, False, lambda sha, sha1: None)  # below it: the reader hashes in line
        assert never.min_bytes == 0 and not never.begin(10**9, False, lambda sha, sha1: None)
    finally:
        thread.abort()
        never.abort()
