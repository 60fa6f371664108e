"""The git layer against real repositories: mirror, fresh checkout, input safety."""

from __future__ import annotations

from pathlib import Path

import pytest
from forge import Forge

from releasekit.errors import InputError
from releasekit.git import Mirror, check_ref, check_remote, fresh_checkout, strip_credentials


@pytest.fixture()
def remote_forge(tmp_path: Path) -> Forge:
    f = Forge(tmp_path / "remote", "vllm")
    f.init({"pkg/__init__.py": "VERSION = 1\n"})
    return f


def test_mirror_fetches_branches_and_pr_heads(remote_forge: Forge, tmp_path: Path) -> None:
    head = remote_forge.open_pr(7, [{"pkg/a.py": "a\n"}, {"pkg/b.py": "b\n"}])
    mirror = Mirror(remote_forge.url, tmp_path / "cache", allow_local=True).update()
    assert mirror.pr_head(7) == head
    assert mirror.pr_head(8) is None
    assert mirror.default_branch() == "main"
    assert mirror.branch_head("main") == remote_forge.remote_rev("refs/heads/main")
    # A force-pushed PR head is seen after the next update; the old one stays readable.
    new_head = remote_forge.force_push_pr(7, [{"pkg/c.py": "c\n"}])
    assert mirror.pr_head(7) == head
    mirror.update()
    assert mirror.pr_head(7) == new_head
    assert mirror.refs_containing(head) == []


def test_fresh_checkout_is_exactly_the_commit(remote_forge: Forge, tmp_path: Path) -> None:
    head = remote_forge.open_pr(3, [{"pkg/new.py": "new\n", "pkg/__init__.py": None}])
    mirror = Mirror(remote_forge.url, tmp_path / "cache", allow_local=True)
    co = fresh_checkout(mirror, head, tmp_path / "co", expect_tree=remote_forge.tree(head))
    assert co.commit == head
    assert sorted(p.name for p in (tmp_path / "co" / "pkg").iterdir()) == ["new.py"]
    assert "origin" not in (tmp_path / "co" / ".git" / "config").read_text()


def test_fresh_checkout_refuses_wrong_tree_and_non_empty_dest(remote_forge: Forge, tmp_path: Path) -> None:
    main = remote_forge.remote_rev("refs/heads/main")
    mirror = Mirror(remote_forge.url, tmp_path / "cache", allow_local=True)
    with pytest.raises(InputError, match="tree is"):
        fresh_checkout(mirror, main, tmp_path / "co", expect_tree="0" * 40)
    assert not (tmp_path / "co").exists()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    with pytest.raises(InputError, match="not empty"):
        fresh_checkout(mirror, main, busy)
    with pytest.raises(InputError, match="does not exist"):
        fresh_checkout(mirror, "1" * 40, tmp_path / "co2")


@pytest.mark.parametrize(
    "url",
    [
        "ext::sh -c touch% /tmp/pwned",
        "-upload-pack=touch",
        "fd::17",
        "http://example.com/r.git",
        "ftp://h/r",
        "git://h/r",
    ],
)
def test_unsafe_urls_are_refused(url: str) -> None:
    with pytest.raises(InputError):
        check_remote(url, allow_local=True)


def test_local_paths_need_the_explicit_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RELEASEKIT_ALLOW_LOCAL_REPOS", raising=False)
    for url in (str(tmp_path), f"file://{tmp_path}"):
        with pytest.raises(InputError, match="refused"):
            check_remote(url)
        assert check_remote(url, allow_local=True).scheme == "file"
    monkeypatch.setenv("RELEASEKIT_ALLOW_LOCAL_REPOS", "1")
    assert check_remote(str(tmp_path)).is_local


def test_https_and_ssh_accepted_credentials_stripped() -> None:
    r = check_remote("https://user:s3cret@github.com/org/repo.git")
    assert r.public == "https://github.com/org/repo.git"
    assert "s3cret" in r.url
    assert check_remote("git@github.com:org/repo.git").scheme == "ssh"
    assert check_remote("ssh://git@github.com/org/repo.git").scheme == "ssh"
    assert strip_credentials("ssh://git:pw@h/r") == "ssh://git@h/r"


def test_credentials_never_reach_the_mirror_on_disk(remote_forge: Forge, tmp_path: Path) -> None:
    # The fetch fails (nothing listens there), but nothing written may hold the password.
    mirror = Mirror("https://alice:hunter2@127.0.0.1:9/org/repo.git", tmp_path / "cache")
    with pytest.raises(InputError) as err:
        mirror.update()
    assert "hunter2" not in str(err.value)
    for path in (tmp_path / "cache").rglob("*"):
        if path.is_file():
            assert b"hunter2" not in path.read_bytes(), path


@pytest.mark.parametrize("ref", ["-x", "--upload-pack=x", "a..b", "HEAD~1", "x^", "a b", "x:y", "@{-1}", ""])
def test_unsafe_refs_are_refused(ref: str) -> None:
    with pytest.raises(InputError):
        check_ref(ref)


def test_plain_refs_pass() -> None:
    for ref in ("main", "dev/fathomless-firmament", "refs/pull/108/head", "83925ac7b6"):
        assert check_ref(ref) == ref


def test_landing_map_is_the_first_first_parent_commit_containing_each_commit(remote_forge: Forge) -> None:
    import random

    from releasekit.git.history import landing_map
    from releasekit.git.runner import Git

    rng = random.Random(7)
    for i in range(6):
        remote_forge.open_pr(
            i + 1,
            [{f"f{i}_{j}.txt": f"{j}\n"} for j in range(rng.randint(1, 3))],
            start=f"main~{rng.randint(0, i)}" if i else None,
        )
        remote_forge.commit({f"main{i}.txt": "m\n"}, f"main {i}", branch="main")
        remote_forge.push("main")
    for i in rng.sample(range(1, 7), 6):
        remote_forge.merge_pr(i, "merge")
    git = Git(remote_forge.work)
    landing = landing_map(git, "main")
    chain = git.run("rev-list", "--first-parent", "--reverse", "main").split()
    assert landing.chain == chain
    for commit, index in landing.index.items():
        assert git.ok("merge-base", "--is-ancestor", commit, chain[index])
        if index:
            assert not git.ok("merge-base", "--is-ancestor", commit, chain[index - 1])
    assert set(landing.index) == set(git.run("rev-list", "main").split())


def test_no_secret_of_releasekits_environment_reaches_a_git_process(
    remote_forge: Forge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34: a program a hostile repository makes git run sees the environment git got. A shell
    alias stands in for it here and prints that environment: no key, token, password or GIT_*."""
    from releasekit.git.runner import Git

    secrets = {
        "RELEASEKIT_SIGNING_KEY": "-----BEGIN PRIVATE KEY-----Zk3yM4t3r1al",
        "GITHUB_TOKEN": "ghp_Zk3yT0k3n",
        "RELEASEKIT_REGISTRY_PASSWORD": "Zk3yPassw0rd",
        "GIT_CONFIG_PARAMETERS": "'core.pager'='sh -c evil'",
        "AWS_SECRET_ACCESS_KEY": "Zk3yAws",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    seen = Git(remote_forge.remote, bare=True).run("-c", "alias.show-env=!env", "show-env")
    names = {line.split("=", 1)[0] for line in seen.splitlines() if "=" in line}
    # git itself passes its -c options on as GIT_CONFIG_PARAMETERS: releasekit's, never the caller's.
    assert not names & (set(secrets) - {"GIT_CONFIG_PARAMETERS"}), names & set(secrets)
    assert "Zk3y" not in seen and "evil" not in seen
    # What git needs to reach a remote still gets through.
    assert "HTTPS_PROXY=http://proxy.invalid:3128" in seen.splitlines()
