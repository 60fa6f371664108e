"""A fork that follows an upstream, as the real vLLM fork's dev/unholy-fusion does (shared by the
release-only tests of the upstream and of mirrors).

The fork's canonical branch started from upstream's main; a release branch has fork-only commits,
merges a newer upstream main (with a conflict resolved by hand) and has more fork commits after it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from forge import Forge

UPSTREAM_COMMITS = 5


class Fork:
    def __init__(self, root: Path) -> None:
        self.upstream = Forge(root / "u", "upstream")
        self.fork_point = self.upstream.init({"a.py": "A = 0\n", "b.py": "B = 0\n"})
        self.fork = Forge(root / "f", "fork", clock=self.upstream.clock)
        self.fork.git("remote", "add", "upstream", self.upstream.url)
        self.fork.git("fetch", "--quiet", "upstream")
        self.fork.switch("main", "upstream/main")
        self.fork.commit({"fork.py": "F = 0\n"}, "fork: canonical work")
        self.fork.push("main")
        # Upstream moves on: five commits, one of which edits a.py as the release does.
        u = self.upstream
        self.upstream_commits = [u.commit({"a.py": "A = 'upstream'\n"}, "upstream: a")]
        for i in range(1, UPSTREAM_COMMITS):
            self.upstream_commits.append(u.commit({f"u{i}.py": f"U = {i}\n"}, f"upstream: u{i}"))
        u.push("main")
        f = self.fork
        f.switch("release", "main")
        self.r1 = f.commit({"b.py": "B = 'release'\n"}, "release: b")
        self.r2 = f.commit({"a.py": "A = 'release'\n"}, "release: a")
        self.picked = f.commit({"c.py": "C = 1\n"}, "release: c (later on canonical)")
        f.git("fetch", "--quiet", "upstream")
        proc = subprocess.run(
            ["git", "-C", str(f.work), "merge", "-m", "Merge upstream/main into release", "upstream/main"],
            capture_output=True,
            env=f._env(),
        )
        assert proc.returncode != 0  # a.py conflicts
        (f.work / "a.py").write_text("A = 'release and upstream'\n")
        f.git("add", "a.py")
        f.git("commit", "--quiet", "--no-edit")
        self.merge = f.rev("HEAD")
        self.r3 = f.commit({"d.py": "D = 1\n"}, "release: d")
        f.cherry_pick(self.picked, "main")
        f.push("main", "release")
        self.upstream_tip = self.upstream.rev("main")
