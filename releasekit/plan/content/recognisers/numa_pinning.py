"""``numa-pinning``: ``numactl`` or ``taskset`` with a literal CPU or memory binding
(``numactl --cpunodebind=0 --membind=0``, ``taskset -c 0-31``), or a Compose ``cpuset``. A
wrapper that passes bindings it is given (``numactl ${ARGS} "$@"``, ``--cpunodebind=$NODE``)
pins nothing itself, and installing the numactl package is no pinning."""

from __future__ import annotations

import re
from collections.abc import Iterator

from releasekit.manifest.content_rules import ContentRule
from releasekit.plan.content.interface import Hit, Kind, ScannedFile
from releasekit.plan.content.reading import simple_commands

# A binding option, with its value glued on (--membind=0, -N0) or in the next word.
_NUMACTL = re.compile(
    r"^(?:--cpunodebind|--membind|--physcpubind|--interleave|--preferred|-N|-m|-C|-i|-p)(?:=?(?P<value>.+))?$"
)
_TASKSET = re.compile(r"^(?:-c|--cpu-list)(?:=(?P<value>.+))?$")
_MASK = re.compile(r"^(?:0x)?[0-9a-fA-F]+$")


def _literal_binding(tool: str, args: list[str]) -> bool:
    """Whether ``args`` (the words after the tool) bind to CPUs or nodes written out in the file."""
    for i, arg in enumerate(args):
        if tool == "numactl" and arg in ("--localalloc", "-l"):
            return True
        m = (_NUMACTL if tool == "numactl" else _TASKSET).match(arg)
        if m:
            value = m.group("value") or (args[i + 1] if i + 1 < len(args) else "")
            return bool(value) and "$" not in value
        if tool == "taskset" and _MASK.match(arg):
            return True
        if not arg.startswith("-"):
            return False  # the command being pinned starts here
    return False


_CPUSET = re.compile(r"^\s*cpuset\s*:\s*\S")


class NumaPinning:
    rule: ContentRule = "numa-pinning"
    kinds: frozenset[Kind] = frozenset({"dockerfile", "shell", "compose"})

    def find(self, source: ScannedFile) -> Iterator[Hit]:
        if source.kind == "compose":
            for lineno, line in enumerate(source.lines, start=1):
                if _CPUSET.match(line):
                    yield Hit(source.path, lineno, self.rule, f"Compose {line.strip()}")
            return
        for command in source.commands:
            for simple in simple_commands(command):
                words = [w for _, w in simple]
                for i, word in enumerate(words):
                    tool = word.rsplit("/", 1)[-1]
                    if tool in ("numactl", "taskset") and _literal_binding(tool, words[i + 1 :]):
                        yield Hit(
                            source.path, simple[i][0], self.rule, f"{tool} {' '.join(words[i + 1 : i + 3])}"
                        )
                        break


RECOGNISER = NumaPinning()
