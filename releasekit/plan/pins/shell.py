"""Shell installs and version variables, as Dockerfiles and workflows write them (release scope).

``pip``/``pip3``/``python -m pip``/``uv pip`` ``install`` and ``uv add`` over ``\\``
continuation lines; each argument is reported on the line where it is written. ``ARG``/``ENV``
(``env:`` in a workflow) variables named after a pinned package (``APACHE_TVM_FFI_VERSION=…``)
state its version too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from releasekit.plan.pins.interface import Found, InputFile, Stated
from releasekit.plan.pins.text import FILE_OPTIONS, logical_lines, same_version, strip_comment, tokens

_INSTALL = re.compile(
    r"(?:\b(?:pip3?|pip3\.\d+)\s+install|\buv\s+pip\s+install|\buv\s+add|-m\s+pip\s+install)\b"
)
# pip options that take a value (the value is not a requirement).
_VALUE_OPTS = {
    "-i",
    "--index-url",
    "--extra-index-url",
    "-f",
    "--find-links",
    "-t",
    "--target",
    "--prefix",
    "--root",
    "--python",
    "--platform",
    "--python-version",
    "--implementation",
    "--abi",
    "--src",
    "--upgrade-strategy",
    "--progress-bar",
    "--cache-dir",
    "--log",
    "--trusted-host",
    "--config-settings",
    "-C",
    "--report",
    "--no-binary",
    "--only-binary",
    "--global-option",
    "--timeout",
    "--retries",
    "--group",
}
_SHELL_SEPARATORS = {"&&", "||", ";", "|", "&"}


def _is_install_verb(words: list[tuple[int, str]], i: int) -> bool:
    w = words[i][1]
    nxt = words[i + 1][1] if i + 1 < len(words) else ""
    return (
        w in ("install", "add")
        and i > 0
        and words[i - 1][1] in ("pip", "pip3", "uv")
        or re.fullmatch(r"pip3\.\d+", words[i - 1][1] if i else "") is not None
    ) or (w == "pip" and nxt == "install" and i > 0 and words[i - 1][1] == "-m")


def _install_words(logical: list[tuple[int, str]], source: InputFile) -> Iterator[tuple[int, str]]:
    """The requirement arguments of every install command of a shell logical line."""
    joined = " ".join(text for _, text in logical)
    if not _INSTALL.search(joined):
        return
    words = tokens(logical)
    i = 0
    while i < len(words):
        if _is_install_verb(words, i):
            if words[i][1] == "pip":
                i += 1
            i += 1
            while i < len(words) and words[i][1] not in _SHELL_SEPARATORS:
                lineno, arg = words[i]
                if arg.endswith((";", "&&")):
                    arg = arg.rstrip(";&")
                    if arg:
                        yield lineno, arg
                    break
                if arg in FILE_OPTIONS and i + 1 < len(words):
                    source.name_file(words[i + 1][1])
                    i += 2
                    continue
                if arg in _VALUE_OPTS:
                    i += 2
                    continue
                if (
                    arg.startswith("-")
                    or arg in (".", "..")
                    or arg.startswith(("./", "../", "/"))
                    or arg.endswith((".whl", ".tar.gz"))
                    and "@" not in arg
                ):
                    i += 1
                    continue
                yield lineno, arg
                i += 1
        i += 1


def shell_installs(source: InputFile, lines: list[str]) -> Iterator[Found]:
    """The install arguments of ``lines`` (``source``'s lines, with any non-shell framing removed)."""
    for logical in logical_lines(lines):
        for lineno, arg in _install_words(logical, source):
            yield Found(source.path, lineno, arg, "release")


def _var_names(package: str) -> set[str]:
    words = [w.upper() for w in re.split(r"[-_.]+", package) if w]
    names = set()
    for start in range(len(words)):
        stem = "_".join(words[start:])
        if start and len(words) - start < 2 and len(stem) < 4:
            continue  # "FFI_VERSION" alone is too generic to be this package
        names.update({f"{stem}_VERSION", f"{stem}_VER"})
    return names


def version_variables(source: InputFile, any_assignment: bool) -> None:
    """Record in ``source.stated`` each variable naming a pinned package's version; ``ARG``/``ENV``
    lines only, unless ``any_assignment`` (a workflow's ``env:``)."""
    for lineno, raw in enumerate(source.lines, start=1):
        line = strip_comment(raw)
        for want in source.wanted:
            if "release" not in want.scopes:
                continue
            for var in _var_names(want.package):
                m = re.search(rf"(?:^|\s|-\s*){var}\s*(?:=|:)\s*[\"']?([A-Za-z0-9.+!_-]+)", line)
                if m and (any_assignment or re.match(r"\s*(ARG|ENV)\b", line)):
                    value = m.group(1)
                    found = Found(source.path, lineno, f"{var}={value}", "release")
                    source.stated.append(
                        Stated(found, want, f"{var}={value}", same_version(value, want.version))
                    )
