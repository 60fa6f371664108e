"""``audit pins``: every pinned package has the same version in every input that names it.

The package is laid out so that a new input format is one module:

- ``interface.py``: ``PinSource`` (which files a format claims, the requirements it finds in
  one, each at its file:line) and the records it yields (``Found``, ``Stated``);
- ``sources/``: one module per format (requirement files, ``pyproject.toml``, ``setup.py``,
  ``pixi.toml``, Dockerfiles, GitHub workflows), listed in ``registry.py``;
- ``tree.py``: one commit's files, read through git objects (never a work tree);
- ``audit.py``: what was found compared with the manifest's pins (the findings);
- ``service.py``: ``audit pins`` on a local repository.

Other files (``.py`` modules, docs) are not read: a docstring naming an old version is not a
release input.
"""

from releasekit.manifest.models import Pin
from releasekit.plan.pins.audit import audit_pins
from releasekit.plan.pins.registry import release_inputs
from releasekit.plan.pins.service import pins_service
from releasekit.plan.pins.tree import CommitTree, commit_tree

__all__ = ["CommitTree", "Pin", "audit_pins", "commit_tree", "pins_service", "release_inputs"]
