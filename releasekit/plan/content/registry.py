"""The recognisers, one per content rule, in the order of ``manifest/content_rules.py``."""

from __future__ import annotations

from releasekit.plan.content.interface import Recogniser
from releasekit.plan.content.recognisers import (
    cache_warmup,
    commit_archive_url,
    compose_engine,
    editable_install,
    engine_launcher,
    git_at_commit,
    numa_pinning,
    patch_applied,
    patch_file,
    pip_vcs_url,
    pth_injection,
    pythonpath_source_tree,
    site_packages_overlay,
)

RECOGNISERS: tuple[Recogniser, ...] = (
    git_at_commit.RECOGNISER,
    pip_vcs_url.RECOGNISER,
    commit_archive_url.RECOGNISER,
    pythonpath_source_tree.RECOGNISER,
    editable_install.RECOGNISER,
    site_packages_overlay.RECOGNISER,
    pth_injection.RECOGNISER,
    patch_file.RECOGNISER,
    patch_applied.RECOGNISER,
    engine_launcher.RECOGNISER,
    compose_engine.RECOGNISER,
    numa_pinning.RECOGNISER,
    cache_warmup.RECOGNISER,
)
