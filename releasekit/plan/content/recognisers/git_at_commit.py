"""``git-at-commit``: a recipe that clones or fetches a repository and checks out a fixed commit.

The commit may be written out or come from the file's own variables (``ARG B12X_COMMIT=<sha>``,
``COMMIT="${COMMIT:-<sha>}"``). A ``git checkout <sha>`` in a file that neither clones nor
fetches is a script moving its own work tree, not a fetch of source, and is left alone.
"""

from __future__ import annotations

from collections.abc import Iterator

from releasekit.manifest.content_rules import ContentRule
from releasekit.plan.content.interface import Hit, Kind, ScannedFile
from releasekit.plan.content.reading import expand, is_commit

_MOVES = {"checkout", "switch", "reset", "fetch", "clone"}
# git's own options that take a value before the subcommand (git -C dir checkout ...).
_GIT_VALUE_OPTS = {"-C", "-c", "--git-dir", "--work-tree", "--namespace"}


def _subcommand(words: list[str], i: int) -> tuple[str, int] | None:
    """The subcommand of the ``git`` at ``i`` and where its arguments start."""
    j = i + 1
    while j < len(words) and words[j].startswith("-"):
        j += 2 if words[j] in _GIT_VALUE_OPTS else 1
    return (words[j], j + 1) if j < len(words) else None


class GitAtCommit:
    rule: ContentRule = "git-at-commit"
    kinds: frozenset[Kind] = frozenset({"dockerfile", "shell"})

    def find(self, source: ScannedFile) -> Iterator[Hit]:
        if not any(
            (sub := _subcommand([w for _, w in c.words], i)) and sub[0] in ("clone", "fetch")
            for c in source.commands
            for i, (_, w) in enumerate(c.words)
            if w == "git"
        ):
            return
        for command in source.commands:
            words = [w for _, w in command.words]
            for i, word in enumerate(words):
                if word != "git" or (sub := _subcommand(words, i)) is None or sub[0] not in _MOVES:
                    continue
                verb, start = sub
                for j in range(start, len(words)):
                    arg = words[j]
                    if arg in ("&&", "||", ";", "|"):
                        break
                    value = expand(
                        arg.split("=", 1)[1] if arg.startswith("--revision=") else arg, source.variables
                    )
                    if verb == "clone" and not (arg.startswith("--revision") or words[j - 1] == "--revision"):
                        continue
                    if is_commit(value):
                        named = f" ({arg.strip('${}')})" if value != arg else ""
                        yield Hit(
                            source.path,
                            command.words[j][0],
                            self.rule,
                            f"git {verb} {value[:12]}{named}: source fetched at a fixed commit",
                        )
                        break


RECOGNISER = GitAtCommit()
