"""``editable-install``: an editable install of a whole source tree (``pip install -e .``, of an
absolute directory, ``setup.py develop``): the image then runs the copied tree, not a built
wheel. An editable install of a sub-directory (a test helper package) is not the component."""

from __future__ import annotations

from collections.abc import Iterator

from releasekit.manifest.content_rules import ContentRule
from releasekit.plan.content.interface import Hit, Kind, ScannedFile
from releasekit.plan.content.reading import INSTALL, expand


def _whole_tree(target: str) -> bool:
    target = target.split("[", 1)[0]
    return target in (".", "./") or target.startswith("/")


class EditableInstall:
    rule: ContentRule = "editable-install"
    kinds: frozenset[Kind] = frozenset({"dockerfile", "shell"})

    def find(self, source: ScannedFile) -> Iterator[Hit]:
        for command in source.commands:
            words = [w for _, w in command.words]
            if "setup.py" in words and "develop" in words:
                yield Hit(source.path, command.line, self.rule, "setup.py develop")
                continue
            if not INSTALL.search(command.text):
                continue
            for i, word in enumerate(words):
                if word in ("-e", "--editable") and i + 1 < len(words):
                    target = expand(words[i + 1], source.variables)
                elif word.startswith(("--editable=", "-e")) and len(word) > 2 and not word.startswith("--e"):
                    target = expand(word.split("=", 1)[1] if "=" in word else word[2:], source.variables)
                else:
                    continue
                if _whole_tree(target):
                    yield Hit(source.path, command.words[i][0], self.rule, f"pip install -e {target}")


RECOGNISER = EditableInstall()
