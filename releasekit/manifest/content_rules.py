"""The names of the content rules: what ``plan check`` recognises in a component's tree by what
a file does, not by its name (the recognisers are ``releasekit/plan/content/recognisers/``).

The manifest names them (an exclusion's ``rules``, a component's ``accepted_files``), so the
names live here, before the plan stage; ``tests/test_content_rules.py`` holds the recognisers
to exactly this table.
"""

from __future__ import annotations

from typing import Literal, get_args

Family = Literal["vcs-fetch", "source-overlay", "unpublished-patch", "deployment"]

ContentRule = Literal[
    "git-at-commit",
    "pip-vcs-url",
    "commit-archive-url",
    "pythonpath-source-tree",
    "editable-install",
    "site-packages-overlay",
    "pth-injection",
    "patch-file",
    "patch-applied",
    "engine-launcher",
    "compose-engine",
    "numa-pinning",
    "cache-warmup",
]

# rule -> (family, what it matches), in the order docs/plan.md lists them.
CONTENT_RULES: dict[str, tuple[Family, str]] = {
    "git-at-commit": ("vcs-fetch", "a recipe clones or fetches a repository and checks out a fixed commit"),
    "pip-vcs-url": ("vcs-fetch", "a pip/uv install of a git+/hg+/svn+ URL"),
    "commit-archive-url": ("vcs-fetch", "a download of a repository archive of one commit"),
    "pythonpath-source-tree": (
        "source-overlay",
        "PYTHONPATH set to an absolute directory (a copied source tree put ahead of the installed one)",
    ),
    "editable-install": ("source-overlay", "an editable install (pip install -e) of a whole source tree"),
    "site-packages-overlay": (
        "source-overlay",
        "files copied into site-packages, or the component's installed copy replaced, removed or compared in place",
    ),
    "pth-injection": ("source-overlay", "a .pth file written into the interpreter's path"),
    "patch-file": ("unpublished-patch", "a unified diff committed as a file"),
    "patch-applied": ("unpublished-patch", "git apply / git am / patch -pN in a recipe"),
    "engine-launcher": (
        "deployment",
        "a launcher that execs the serving engine with memory, graph, NUMA or parallelism settings, or VLLM_* switches",
    ),
    "compose-engine": ("deployment", "a Compose file with a service that runs the serving engine"),
    "numa-pinning": ("deployment", "numactl or taskset with a literal CPU or memory binding"),
    "cache-warmup": (
        "deployment",
        "a script that drives the engine's API to fill its runtime caches (JIT, graphs) before traffic",
    ),
}
assert tuple(CONTENT_RULES) == get_args(ContentRule)
