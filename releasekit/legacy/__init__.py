"""The legacy room: a one-off migration from today's tool, kept out of the configuration package.

``importer.py`` turns today's merge manifest, integration lock and validation receipt into a
releasekit manifest (and lock), ``models.py`` models the two files only it reads (the receipt,
which the pipeline reads too, is ``records/legacy.py``'s), and ``commands.py`` is
``releasekit manifest import``. It may import ``manifest`` (what it writes) and the shared
modules; nothing but the shell imports it (docs/architecture.md, "The legacy room").
"""
