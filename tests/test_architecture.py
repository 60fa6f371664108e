"""The layout rules of docs/architecture.md, checked on the import graph of ``releasekit/``.

Every ``import`` and ``from ... import`` counts, at module level and inside functions
(a lazy import is still a dependency). The rules:

- no import cycle between modules;
- a stage never imports a later stage (manifest < plan < build < provenance < staging < test <
  validate < publish < reproduce);
- nothing imports ``demo``; ``demo`` may import anything;
- the shared modules (errors, findings, checks, records, git, docker_engine, forge, fatbin, report,
  simple_index, signing, digests, registry, atomic, bounded_read, cli_options) import no stage, except that ``records`` may embed the manifest's models (the
  manifest is every stage's input: a receipt carries the cell it judged); ``cli`` may import only stage ``commands``
  (and typer-free ``fast_commands``) modules;
- no cycle between packages either (each top-level package or module counted as one node);
- one writer: only ``atomic.py`` replaces, renames or links files and fsyncs;
- the legacy room (``legacy/``) imports only ``manifest`` of the stages, and only cli imports it;
- a stage's ``commands`` module imports no other stage's ``commands`` (shared options are in
  ``cli_options``);
- every top-level module is a stage, ``demo`` or a shared module;
- ``provenance`` and ``reproduce`` use the builder's library (``builder/release_image.py``), never its
  orchestrator ``builder/service.py``; only a stage's ``commands`` module, which wires services
  together, may hand ``run_build`` on;
- effects passed in: outside the edge (a stage's ``commands`` module, ``cli``, ``demo/``) and the
  adapter that defines the factory, nothing calls a factory of an external system (``connect``,
  ``Engine``, ``LazyEngine``, ``sdk_client`` of the Docker adapter, ``RegistryClient``,
  ``GitHubForge``/``GitHubForges``, ``SystemClock``; ``docker_client``/``DockerEngine`` by any name) or reads the wall
  clock (``datetime.now``/``utcnow``, ``date.today``, ``time.time``): each is made at the edge and
  passed in. A call is resolved through the module's imports, so ``sqlite3.connect`` or the serving
  engines' own ``Engine`` classes are no such call;
- no function takes more than 5 positional parameters (keyword-only ones after ``*`` are free; a
  typer command in a ``commands.py`` is excepted, its parameters are the command's options): what
  travels together is one frozen object, as a builder step takes the frozen ``BuildRun``;
- only ``releasekit/docker_engine/`` imports ``docker``; only ``releasekit/forge/`` imports ``githubkit``;
- typed evidence: ``json.load``/``json.loads`` only in ``records/`` (each file's model) and the
  modules of ``JSON_ALLOWLIST`` (JSON that is no release file: tool output, wire messages,
  argv hand-offs, each with its reason), and a release file's name (``"build.json"``...) as a
  string literal only in ``records/`` (everyone else uses the record module's constant).
- no function is longer than 60 lines unless docs/architecture.md's "Long functions" list names it
  (orchestrators delegate).

The checker is proven able to fail on a small package made in tmp_path for each rule.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

STAGES = (
    "manifest",
    "plan",
    "builder",
    "provenance",
    "staging",
    "suites",
    "validate",
    "publish",
    "reproduce",
)
SHARED = frozenset(
    {
        "errors",
        "findings",
        "checks",
        "records",
        "git",
        "docker_engine",
        "forge",
        "fatbin",
        "report",
        "simple_index",
        "signing",
        "digests",
        "registry",
        "atomic",
        "bounded_read",
        "child_env",  # the allow-listed environment of every non-git child process
        "deadline",  # the hard stop of a command's --deadline
        "engine_adapters",  # the engine registry: the names the manifest accepts, the adapters validate loads
        "clock",  # the wall clock a command makes and passes in (releasekit/clock.py)
        "cli_options",  # the typer options several stages' commands share; cli.py does not import it
    }
)
# A side room, not a pipeline stage: a one-off migration from today's tool. It may import the
# manifest (what it writes) and shared modules; nothing but the shell (cli) imports it.
LEGACY = "legacy"
ENTRY = frozenset(
    {"cli", "__main__"}
)  # the shell: may import stage ``commands`` modules (cli), or cli (__main__)
DEMO = "demo"
ADAPTER = "docker_engine"
RECORDS = "records"  # the one home of the release files' models, names and parsing
# The build's orchestrator: the stages after it that rebuild use the builder's library module instead.
BUILD_ORCHESTRATOR = "builder.service"
LIBRARY_USERS = ("provenance", "reproduce")
MAX_POSITIONAL = 5
# Effects made only at the edge (docs/architecture.md, "Effects passed in"): the qualified names of their
# factories (as defined and as re-exported) and of the wall-clock reads; a call resolving to one of them
# outside EFFECT_EDGE and the defining adapter is a finding.
_DOCKER_FACTORIES = ("connect", "Engine", "LazyEngine", "sdk_client")
EFFECT_FACTORIES = frozenset(
    {
        *(f"releasekit.docker_engine.{n}" for n in _DOCKER_FACTORIES),
        *(f"releasekit.docker_engine.client.{n}" for n in _DOCKER_FACTORIES),
        "releasekit.registry.RegistryClient",
        "releasekit.forge.GitHubForge",
        "releasekit.forge.github.GitHubForge",
        "releasekit.forge.GitHubForges",
        "releasekit.forge.github.GitHubForges",
        "releasekit.clock.SystemClock",
        "datetime.datetime.now",
        "datetime.datetime.utcnow",
        "datetime.date.today",
        "time.time",
        "time.time_ns",
    }
)
EFFECT_NAMES = frozenset({"docker_client", "DockerEngine"})  # names with no other meaning: caught by name
EFFECT_ADAPTERS = ("docker_engine", "forge", "registry", "clock")  # where the factories are defined

# Release files (and their DSSE envelopes): named by a constant of their record module only.
RELEASE_FILES = frozenset(
    {
        "lock.json",
        "plan-check.json",
        "build.json",
        "provenance.intoto.json",
        "provenance.intoto.dsse.json",
        "archive.json",
        "verification_summary.json",
        "staging.json",
        "verification_summary.dsse.json",
        "hygiene.json",
        "summary.json",
        "gate.json",
        "publish.json",
        "RELEASE.md",
        "sbom.cdx.json",
    }
)

# Modules that parse JSON which is no release file (docs/architecture.md, "Typed evidence").
JSON_ALLOWLIST = {
    "releasekit.builder.dockerfile": "a Dockerfile's exec-form JSON arrays",
    "releasekit.builder.image": "docker save's own manifest.json and config in the base tar",
    "releasekit.builder.pep517_hooks": "argv hand-off to the PEP 517 hook process",
    "releasekit.builder.smoke_probe": "argv hand-off to the in-image smoke probe",
    "releasekit.builder.wheel": "the PEP 517 hook process's result files",
    "releasekit.demo.small_model": "a Hugging Face model's config.json and safetensors header",
    "releasekit.forge.etag_cache": "the forge client's conditional-request cache entries (a cache, no release file)",
    "releasekit.provenance.image": "the in-image probe's report on stdout",
    "releasekit.provenance.installed": "PEP 610 direct_url.json of installed distributions",
    "releasekit.provenance.probe": "argv hand-off to the in-image probe",
    "releasekit.provenance.reproduce": "the image config it computed itself, for comparison",
    "releasekit.suites.checks.ruff": "ruff's diagnostics output",
    "releasekit.validate.checks.acceptance": "the engine's per-request metrics lines",
    "releasekit.validate.checks.gsm8k": "the GSM8K dataset lines",
    "releasekit.validate.checks.throughput": "the benchmark's result line",
    "releasekit.validate.client": "the OpenAI API's server-sent events",
    "releasekit.validate.engines.vllm": "argv hand-off to the in-container cell runner",
    "releasekit.validate.preflight": "the in-container preflight's marker line",
    "releasekit.validate.router": "HTTP request bodies of the test router",
}
FORGE_ADAPTER = "forge"  # the only package that imports githubkit
# The stages and shared modules that read evidence: between their functions evidence travels as
# models, never as parsed JSON (``Any``) or a ``dict`` of it.
EVIDENCE_READERS = ("publish", "reproduce", "signing")
_UNTYPED = re.compile(r"^Any( \| None)?$|dict\[str, Any\]")


@dataclass(frozen=True, order=True)
class Violation:
    rule: str  # cycle | later-stage | builder-orchestrator | effect-made | imports-demo | shared-imports-stage | unplaced | docker | json | file-name
    module: str
    message: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.module}: {self.message}"


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package at ``root``."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join([package, *parts])] = path
    return out


def imports_of(name: str, path: Path) -> list[tuple[str, tuple[str, ...], int]]:
    """Every import statement in the file, anywhere in it: (module, names taken from it, line)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: list[tuple[str, tuple[str, ...], int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, (), node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            found.append((target, tuple(alias.name for alias in node.names), node.lineno))
    return found


def import_graph(root: Path, package: str) -> tuple[dict[str, set[str]], list[tuple[str, str, int]]]:
    """Edges between the package's own modules, and every (module, imported module, line).

    ``from pkg import mod`` is an edge to ``pkg.mod`` when that is a module, else to ``pkg``.
    """
    modules = module_names(root, package)
    edges: dict[str, set[str]] = {m: set() for m in modules}
    raw: list[tuple[str, str, int]] = []
    for name, path in modules.items():
        for target, names, line in imports_of(name, path):
            raw.append((name, target, line))
            submodules = {f"{target}.{n}" for n in names if f"{target}.{n}" in modules}
            plain = not names or len(submodules) < len(names)
            for dst in submodules | ({target} if plain else set()):
                if dst in modules and dst != name:
                    edges[name].add(dst)
    return edges, raw


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def layer(module: str, package: str) -> str:
    """The top-level part a module belongs to: a stage, demo, a shared module, cli, or the package root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == package else ""


def check_package(root: Path, package: str = "releasekit") -> list[Violation]:
    edges, raw = import_graph(root, package)
    out: list[Violation] = []
    for component in cycles(edges):
        out.append(Violation("cycle", component[0], "import cycle: " + " <-> ".join(component)))
    placed = {*STAGES, *SHARED, *ENTRY, DEMO, LEGACY, ""}
    for module in sorted(edges):
        if layer(module, package) not in placed:
            out.append(Violation("unplaced", module, "not in a stage, demo/, or a shared module"))
    for module in sorted(edges):
        src = layer(module, package)
        for target in sorted(edges[module]):
            dst = layer(target, package)
            if src in (dst, DEMO):
                continue
            if dst == DEMO and not (src == "cli" and target == f"{package}.{DEMO}.commands"):
                out.append(
                    Violation("imports-demo", module, f"imports {target}: nothing depends on the demo")
                )
            elif dst == LEGACY and src != "cli":
                out.append(
                    Violation("imports-legacy", module, f"imports {target}: only cli imports {LEGACY}/")
                )
            elif src == LEGACY and dst in STAGES and dst != STAGES[0]:
                out.append(
                    Violation(
                        "legacy-imports-stage", module, f"imports {target}: {LEGACY}/ imports only manifest"
                    )
                )
            elif src in STAGES and dst in STAGES and STAGES.index(dst) > STAGES.index(src):
                out.append(
                    Violation("later-stage", module, f"imports {target}: stage {src} comes before {dst}")
                )
            elif (
                src == "cli"
                and dst in STAGES
                and target
                not in (
                    f"{package}.{dst}.commands",
                    f"{package}.{dst}.fast_commands",  # a typer-free entry (docs/architecture.md)
                )
            ):
                out.append(
                    Violation(
                        "shared-imports-stage", module, f"imports {target}: cli imports only <stage>.commands"
                    )
                )
            elif (
                src in LIBRARY_USERS
                and target == f"{package}.{BUILD_ORCHESTRATOR}"
                and module != f"{package}.{src}.commands"
            ):
                out.append(
                    Violation(
                        "builder-orchestrator",
                        module,
                        f"imports {target}: use {package}.builder.release_image (the builder's library)",
                    )
                )
            elif (
                src in STAGES
                and dst in STAGES
                and module == f"{package}.{src}.commands"
                and target == f"{package}.{dst}.commands"
            ):
                out.append(
                    Violation(
                        "commands-imports-commands",
                        module,
                        f"imports {target}: shared options live in {package}.cli_options",
                    )
                )
            elif src == "records" and dst == "manifest":
                continue  # a record may embed the manifest's own models (a receipt is bound to its cell)
            elif src in SHARED | {"__main__", ""} and dst in STAGES:
                out.append(
                    Violation(
                        "shared-imports-stage", module, f"imports {target}: a shared module imports no stage"
                    )
                )
    for module, target, line in raw:
        if (target == "docker" or target.startswith("docker.")) and layer(module, package) != ADAPTER:
            out.append(
                Violation("docker", module, f"line {line}: imports {target}: only {package}/{ADAPTER}/ may")
            )
        if (target == "githubkit" or target.startswith("githubkit.")) and layer(
            module, package
        ) != FORGE_ADAPTER:
            out.append(
                Violation(
                    "githubkit", module, f"line {line}: imports {target}: only {package}/{FORGE_ADAPTER}/ may"
                )
            )
    out += evidence_violations(root, package)
    out += effect_violations(root, package)
    out += untyped_evidence_violations(root, package)
    return sorted(set(out))


def _untyped(annotation: ast.expr | None) -> bool:
    return annotation is not None and bool(_UNTYPED.search(ast.unparse(annotation)))


def untyped_evidence_violations(root: Path, package: str) -> list[Violation]:
    """A function of an evidence reader that takes or returns ``Any`` or ``dict[str, Any]``.

    The exceptions: a parser, whose untyped parameter is named ``data`` and whose result is
    typed (raw JSON in, a model out), and ``*args``/``**kwargs`` handed through to a library.
    """
    out: list[Violation] = []
    for module, path in module_names(root, package).items():
        if layer(module, package) not in EVIDENCE_READERS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = node.args
            params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
            bad = [a.arg for a in params if _untyped(a.annotation) and a.arg != "data"]
            parser = not _untyped(node.returns)
            if any(_untyped(a.annotation) for a in params if a.arg == "data") and not parser:
                bad.append("data")
            if _untyped(node.returns):
                bad.append("return")
            if bad:
                out.append(
                    Violation(
                        "untyped-evidence",
                        module,
                        f"line {node.lineno}: {node.name}({', '.join(bad)}) is untyped: pass the model",
                    )
                )
    return out


def _json_readers(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Names bound to the json module, and names bound to json.load/json.loads, by the file's imports."""
    modules: set[str] = set()
    functions: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "json"}
        elif isinstance(node, ast.ImportFrom) and node.module == "json" and not node.level:
            functions |= {a.asname or a.name for a in node.names if a.name in ("load", "loads")}
    return modules, functions


def evidence_violations(root: Path, package: str) -> list[Violation]:
    """JSON parsed outside records/ (and the allowlist); a release file's name spelled outside records/."""
    out: list[Violation] = []
    for module, path in module_names(root, package).items():
        if layer(module, package) == RECORDS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        modules, functions = _json_readers(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and module not in JSON_ALLOWLIST:
                f = node.func
                if (
                    isinstance(f, ast.Attribute)
                    and f.attr in ("load", "loads")
                    and isinstance(f.value, ast.Name)
                    and f.value.id in modules
                ) or (isinstance(f, ast.Name) and f.id in functions):
                    out.append(
                        Violation(
                            "json",
                            module,
                            f"line {node.lineno}: parses JSON: a file's model in records/ does",
                        )
                    )
            elif isinstance(node, ast.Constant) and node.value in RELEASE_FILES:
                out.append(
                    Violation(
                        "file-name",
                        module,
                        f"line {node.lineno}: {node.value!r}: use the constant of its records/ module",
                    )
                )
    return out


def _bindings(name: str, path: Path, tree: ast.AST) -> dict[str, str]:
    """Local name -> the qualified name it was imported as (``import a.b as c``: c -> a.b;
    ``from a import b as c``: c -> a.b; ``import a.b``: a -> a), relative imports resolved."""
    out: dict[str, str] = {}
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    out[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    out[top] = top
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                out[alias.asname or alias.name] = f"{module}.{alias.name}"
    return out


def _qualified(node: ast.expr, bindings: dict[str, str]) -> str | None:
    """``a.b.c`` resolved through the imports (``a`` bound to ``x.y``: ``x.y.b.c``); None when its root
    is no imported name (a local, a parameter, an attribute of an object)."""
    if isinstance(node, ast.Name):
        return bindings.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = _qualified(node.value, bindings)
        return f"{owner}.{node.attr}" if owner else None
    return None


def in_effect_edge(module: str, package: str) -> bool:
    """The edge that makes effects: a stage's (or the legacy room's) ``commands``, ``cli``, ``demo/``,
    and the adapters that define the factories."""
    top = layer(module, package)
    return (top in (*STAGES, LEGACY) and module == f"{package}.{top}.commands") or top in (
        "cli",
        DEMO,
        *EFFECT_ADAPTERS,
    )


def effect_calls(name: str, path: Path) -> list[tuple[int, str]]:
    """(line, what) for each call in the file that makes an effect or reads the wall clock."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bindings = _bindings(name, path, tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        qualified = _qualified(f, bindings)
        if called in EFFECT_NAMES or (qualified or "").split(".")[-1] in EFFECT_NAMES:
            found.append((node.lineno, f"{called}()"))
        elif qualified in EFFECT_FACTORIES:
            found.append((node.lineno, f"{called}() ({qualified})"))
    return found


def effect_violations(root: Path, package: str) -> list[Violation]:
    """An effect (Docker engine, registry or forge client, the wall clock) made outside the edge."""
    out: list[Violation] = []
    for module, path in module_names(root, package).items():
        if in_effect_edge(module, package):
            continue
        for line, what in effect_calls(module, path):
            out.append(
                Violation(
                    "effect-made",
                    module,
                    f"line {line}: {what}: made by the command (commands.py) and passed in",
                )
            )
    return out


# --- the real tree ------------------------------------------------------------------------------


def test_releasekit_follows_the_layout_rules():
    found = check_package(REPO / "releasekit")
    assert not found, "layout rules broken (docs/architecture.md):\n" + "\n".join(map(str, found))


def test_the_real_tree_is_actually_walked():
    edges, raw = import_graph(REPO / "releasekit", "releasekit")
    assert "releasekit.cli" in edges and len(edges) > 50
    # function-level imports are seen: plan/commands.py imports its services inside the commands
    assert "releasekit.plan.locking" in edges["releasekit.plan.commands"]


# --- the checker can fail -----------------------------------------------------------------------


def make_package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "releasekit"
    base = {
        "__init__.py": "",
        "errors.py": "",
        "cli.py": "def main():\n    from releasekit.plan import commands\n",
        "__main__.py": "from releasekit.cli import main\n",
        "docker_engine/__init__.py": "import docker\nfrom docker.errors import NotFound\n",
        "demo/__init__.py": "",
        "demo/service.py": "from releasekit.publish import service\nfrom releasekit.plan import service as plan\n",
        **{f"{s}/__init__.py": "" for s in STAGES},
        **{
            f"{s}/service.py": "from releasekit.errors import *\nfrom releasekit import docker_engine\n"
            for s in STAGES
        },
        "plan/commands.py": "def run():\n    from releasekit.plan.service import x\n",
        "publish/service.py": "from releasekit.builder import service\nfrom ..manifest import service as m\n",
        # records/ may parse JSON and spell file names; an allowlisted module may parse JSON
        "records/__init__.py": "",
        "records/build.py": 'import json\nBUILD_FILE = "build.json"\ndef read(t):\n    return json.loads(t)\n',
        "validate/client.py": "import json\ndef event(d):\n    return json.loads(d)\n",
        "builder/docs.py": '"""Writes build.json and RELEASE.md."""\n',
    }
    for rel, text in {**base, **files}.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return pkg


def test_a_package_that_follows_the_rules_has_no_findings(tmp_path):
    assert check_package(make_package(tmp_path, {})) == []


CASES = {
    "cycle": {
        # only one side imports at module level; the other inside a function
        "plan/a.py": "from releasekit.plan.b import helper\n",
        "plan/b.py": "def helper():\n    from releasekit.plan import a\n",
    },
    "later-stage": {"builder/service.py": "def f():\n    from releasekit.provenance.service import x\n"},
    "imports-demo": {"validate/service.py": "from releasekit.demo.service import x\n"},
    "shared-imports-stage": {"findings.py": "def f():\n    from releasekit.plan import service\n"},
    "unplaced": {"lock.py": ""},
    "commands-imports-commands": {
        "staging/commands.py": "STAGED = 1\n",
        "suites/commands.py": "from releasekit.staging.commands import STAGED\n",
    },
    "docker": {"validate/container.py": "def run():\n    import docker.errors\n"},
    "json": {"publish/attach.py": "import json as j\ndef f(b):\n    return j.loads(b)\n"},
    "file-name": {"builder/write.py": 'def f(d):\n    return d / "build.json"\n'},
    "githubkit": {"plan/lock.py": "def read():\n    from githubkit import GitHub\n"},
    "builder-orchestrator": {
        "reproduce/rebuild.py": "def f():\n    from releasekit.builder.service import run\n"
    },
    "effect-made": {
        "reproduce/rebuild.py": "from releasekit.docker_engine import Engine\ndef f():\n    return Engine()\n"
    },
    "imports-legacy": {
        "legacy/importer.py": "x = 1\n",
        "records/gate.py": "from releasekit.legacy.importer import x\n",
    },
    "legacy-imports-stage": {"legacy/importer.py": "from releasekit.plan.service import x\n"},
    "untyped-evidence": {
        "publish/rules.py": "from typing import Any\ndef passed(receipt: dict[str, Any]) -> bool:\n    return bool(receipt)\n"
    },
}


def test_json_read_by_name_import_is_seen(tmp_path):
    pkg = make_package(
        tmp_path, {"reproduce/read.py": "from json import load\ndef f(h):\n    return load(h)\n"}
    )
    assert [(v.rule, v.module) for v in check_package(pkg)] == [("json", "releasekit.reproduce.read")]


def test_a_parser_and_pass_through_kwargs_are_no_untyped_evidence(tmp_path):
    pkg = make_package(
        tmp_path,
        {
            "reproduce/read.py": (
                "from typing import Any\n"
                "class Model: ...\n"
                "def parse(data: Any) -> Model:\n    return Model()\n"
                "def call(url: str, **kwargs: Any) -> None: ...\n"
                "def leak(data: Any) -> Any:\n    return data\n"
            )
        },
    )
    assert [(v.rule, v.message) for v in check_package(pkg)] == [
        ("untyped-evidence", "line 6: leak(data, return) is untyped: pass the model")
    ]


def test_the_json_allowlist_names_real_modules():
    modules = module_names(REPO / "releasekit", "releasekit")
    assert sorted(set(JSON_ALLOWLIST) - set(modules)) == []


@pytest.mark.parametrize("rule", sorted(CASES))
def test_each_rule_reports_its_violation(tmp_path, rule):
    found = check_package(make_package(tmp_path, CASES[rule]))
    assert [v.rule for v in found] == [rule], found


def test_relative_imports_are_resolved(tmp_path):
    pkg = make_package(tmp_path, {"builder/service.py": "from ..validate import service\n"})
    assert [(v.rule, v.module) for v in check_package(pkg)] == [("later-stage", "releasekit.builder.service")]


def test_a_stage_commands_module_may_hand_the_orchestrator_on(tmp_path):
    pkg = make_package(tmp_path, {"provenance/commands.py": "from releasekit.builder.service import run\n"})
    assert check_package(pkg) == []


def test_effects_are_resolved_through_imports(tmp_path):
    """Each factory of an effect, however imported, is found outside the edge; a call of the same name
    that is no such factory (sqlite3.connect, a serving engine's own Engine, a method) is not."""
    lib = (
        "import datetime as dt\n"
        "import time\n"
        "from datetime import date, datetime\n"
        "from releasekit import docker_engine\n"
        "from releasekit.docker_engine import Engine as DockerEngine, LazyEngine\n"
        "from releasekit.registry import RegistryClient\n"
        "from releasekit.forge import GitHubForge, GitHubForges\n"
        "from ..validate.container import docker_client\n"
        "def f():\n"
        "    docker_engine.connect(timeout=60)\n"  # 10
        "    DockerEngine()\n"
        "    LazyEngine(timeout=120)\n"
        "    RegistryClient('h', None)\n"
        "    GitHubForge('u')\n"
        "    GitHubForges()\n"
        "    docker_client()\n"
        "    dt.datetime.now(dt.UTC)\n"
        "    datetime.now()\n"
        "    date.today()\n"
        "    time.time()\n"
    )
    innocent = (
        "import sqlite3\n"
        "import time\n"
        "from releasekit.validate.engines.interface import Engine\n"
        "class Vllm(Engine): ...\n"
        "def g(client, engine_for):\n"
        "    sqlite3.connect(':memory:')\n"
        "    client.connect()\n"
        "    engine_for('vllm').Engine()\n"
        "    Vllm()\n"
        "    time.monotonic()\n"
    )
    pkg = make_package(
        tmp_path,
        {
            "plan/lib.py": lib,
            "validate/engines/__init__.py": "",
            "validate/engines/interface.py": "class Engine: ...\n",
            "validate/innocent.py": innocent,
            # the edge may make them
            "plan/commands.py": lib,
            "demo/run.py": lib,
            "docker_engine/client.py": "class Engine: ...\ndef connect():\n    return Engine()\n",
        },
    )
    found = effect_violations(pkg, "releasekit")
    assert [(v.module, v.message.split(":")[0]) for v in found] == [
        ("releasekit.plan.lib", f"line {n}") for n in range(10, 21)
    ], found


def _command_decorator(node: ast.expr) -> bool:
    """``<app>.command`` or ``<app>.command(...)``: typer's command decorator."""
    target = node.func if isinstance(node, ast.Call) else node
    return isinstance(target, ast.Attribute) and target.attr == "command"


def typer_commands(path: Path, tree: ast.Module) -> set[str]:
    """The CLI command functions of a ``commands.py``: decorated ``@<app>.command(...)``, or handed
    to the decorator by hand (``app.command("name")(function)`` in its ``register``). Their
    parameters are the command's options, which typer reads from the signature."""
    if path.name != "commands.py":
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_command_decorator(d) for d in node.decorator_list):
                found.add(node.name)
        elif isinstance(node, ast.Call) and _command_decorator(node.func) and isinstance(node.func, ast.Call):
            found.update(a.id for a in node.args if isinstance(a, ast.Name))
    return found


def positional_heavy(root: Path) -> list[str]:
    """``path:function (n)`` for each function under ``root`` with more than MAX_POSITIONAL positional
    parameters; a method's ``self`` or ``cls`` is not counted, and a typer command is excepted."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        commands = typer_commands(path, tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in commands:
                names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
                count = len(names) - (1 if names[:1] in (["self"], ["cls"]) else 0)
                if count > MAX_POSITIONAL:
                    found.append(f"{path.relative_to(root).as_posix()}:{node.name} ({count})")
    return found


def test_no_library_function_takes_more_than_five_positional_parameters():
    found = positional_heavy(REPO / "releasekit")
    assert not found, (
        "pass one frozen object for what travels together (as BuildRun), or make independent options"
        " keyword-only (after *):\n" + "\n".join(found)
    )


def test_positional_parameters_are_counted(tmp_path):
    (tmp_path / "steps.py").write_text(
        "def six(a, b, c, d, e, f): ...\n"
        "def five_and_keywords(a, b, c, d, e, *, f, g): ...\n"
        "class Step:\n    def run(self, a, b, c, d, e): ...\n    async def wide(self, a, b, c, d, e, /, f): ...\n",
        encoding="utf-8",
    )
    assert positional_heavy(tmp_path) == ["steps.py:six (6)", "steps.py:wide (6)"]


def test_a_typer_command_may_take_many_options_a_library_function_may_not(tmp_path):
    (tmp_path / "stage").mkdir()
    six = "(a, b, c, d, e, f): ...\n"
    (tmp_path / "stage" / "commands.py").write_text(
        f'@app.command("run")\ndef run{six}@app.command\ndef bare{six}def by_hand{six}def helper{six}'
        'def register(app):\n    app.command("by-hand")(by_hand)\n',
        encoding="utf-8",
    )
    (tmp_path / "stage" / "service.py").write_text(f'@app.command("run")\ndef run{six}', encoding="utf-8")
    assert positional_heavy(tmp_path) == ["stage/commands.py:helper (6)", "stage/service.py:run (6)"]


def test_cli_may_import_stage_commands_only(tmp_path):
    pkg = make_package(
        tmp_path, {"cli.py": "from releasekit.plan import commands\nfrom releasekit.builder import service\n"}
    )
    found = check_package(pkg)
    assert [(v.rule, v.message.split(":")[0]) for v in found] == [
        ("shared-imports-stage", "imports releasekit.builder.service")
    ]


# --- the lazy CLI -------------------------------------------------------------------------------

HEAVY = ("docker", "httpx", "matplotlib", "jinja2", "elftools")  # rich.table: typer draws --help with it


@pytest.mark.parametrize("argv", [["--version"], ["--help"]])
def test_version_and_help_import_no_stage_and_no_heavy_library(argv):
    code = textwrap.dedent(
        f"""
        import sys
        from releasekit import cli
        try:
            cli.main({argv!r})
        except SystemExit:
            pass
        sys.stderr.write("\\n".join(sorted(sys.modules)))
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    loaded = set(r.stderr.split())
    stages = sorted(m for m in loaded if layer(m, "releasekit") in {*STAGES, DEMO, "cli_options"})
    heavy = sorted(m for m in loaded if m in HEAVY)
    assert r.stdout.strip(), r.stderr[-2000:]
    assert stages == [] and heavy == [], (stages, heavy)


def test_the_static_command_table_is_what_the_stages_register():
    from releasekit.cli import COMMANDS, stage_commands

    registered: dict[str, str] = {}
    for module in dict.fromkeys(m for _n, m, _h in COMMANDS):
        for name, command in stage_commands(module).items():
            registered[name] = " ".join((command.help or "").split("\n\n")[0].split())
    assert {n: h for n, _m, h in COMMANDS} == registered


# --- orchestrators delegate: functions over 60 lines -------------------------------------------

MAX_FUNCTION_LINES = 60
DOCS = REPO / "docs" / "architecture.md"


def long_functions(root: Path) -> dict[str, int]:
    """``module/path.py:Class.function`` -> lines (def line to last line) for every function over the limit."""
    found: dict[str, int] = {}

    def walk(node: ast.AST, prefix: str, rel: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                lines = (child.end_lineno or child.lineno) - child.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found[f"{rel}:{name}"] = lines
                walk(child, name + ".", rel)
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".", rel)

    for path in sorted(root.rglob("*.py")):
        walk(ast.parse(path.read_text(encoding="utf-8")), "", path.relative_to(root).as_posix())
    return found


def named_exceptions(text: str) -> set[str]:
    """The functions the "Long functions" section of docs/architecture.md names (``- `path.py:name` ...``)."""
    section = (
        text.split("## Long functions", 1)[1].split("\n## ", 1)[0] if "## Long functions" in text else ""
    )
    return set(re.findall(r"^- `([\w/]+\.py:[\w.]+)`", section, re.M))


def unexplained(root: Path, docs_text: str) -> tuple[list[str], list[str]]:
    """(long functions the docs do not name, names in the docs that are no longer long)."""
    found, named = long_functions(root), named_exceptions(docs_text)
    return sorted(f"{k} ({found[k]} lines)" for k in set(found) - named), sorted(named - set(found))


def test_no_function_over_60_lines_unless_the_docs_name_why():
    missing, stale = unexplained(REPO / "releasekit", DOCS.read_text(encoding="utf-8"))
    assert not missing, "split these, or name them with a reason in docs/architecture.md:\n" + "\n".join(
        missing
    )
    assert not stale, "docs/architecture.md names functions that are no longer long:\n" + "\n".join(stale)


def test_a_long_function_is_found_and_a_named_one_is_excused(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    pkg = make_package(
        tmp_path,
        {
            "plan/long.py": f"class Runner:\n    def go(self):\n{textwrap.indent(body, '    ')}",
            "plan/short.py": f"def fine():\n{''.join(body.splitlines(keepends=True)[:-1])}",
        },
    )
    assert long_functions(pkg) == {"plan/long.py:Runner.go": MAX_FUNCTION_LINES + 1}
    assert unexplained(pkg, "# A\n") == (["plan/long.py:Runner.go (61 lines)"], [])
    docs = "## Long functions\n\n- `plan/long.py:Runner.go`: why\n- `plan/short.py:fine`: stale\n\n## Next\n"
    assert unexplained(pkg, docs) == ([], ["plan/short.py:fine"])


# --- packages, not just modules, form no cycle ---------------------------------------------------


def package_graph(root: Path, package: str) -> dict[str, set[str]]:
    """The import graph with each top-level package (or module) of ``package`` as one node."""
    edges, _ = import_graph(root, package)
    out: dict[str, set[str]] = {layer(m, package) or package: set() for m in edges}
    for module, targets in edges.items():
        src = layer(module, package) or package
        out[src] |= {layer(t, package) or package for t in targets} - {src}
    return out


def test_no_package_level_import_cycle():
    found = cycles(package_graph(REPO / "releasekit", "releasekit"))
    assert not found, "packages import each other in a cycle:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_a_package_level_cycle_is_found(tmp_path):
    # No module-level cycle here: records.base -> digests -> records.io; only the packages loop.
    pkg = make_package(
        tmp_path,
        {
            "records/__init__.py": "",
            "records/base.py": "from releasekit.digests import sha\n",
            "records/io.py": "",
            "digests.py": "from releasekit.records.io import x\n",
        },
    )
    assert cycles(import_graph(pkg, "releasekit")[0]) == []
    assert cycles(package_graph(pkg, "releasekit")) == [["digests", "records"]]


# --- one writer ----------------------------------------------------------------------------------

WRITER = "atomic.py"
# os functions that replace, rename or link a file into place, or make a write durable.
_WRITER_CALLS = frozenset({"replace", "rename", "renames", "link", "symlink", "fsync", "fdatasync"})


def file_replacers(root: Path) -> list[str]:
    """``path:line call`` for every place that renames, replaces or links a file into place, or
    fsyncs: ``os.replace``/``os.rename``/``os.link``/``os.fsync`` (and friends), ``O_DIRECTORY`` (a
    directory opened to fsync it), ``tempfile.mkstemp`` beside a target, and a ``Path`` method
    ``.replace(x)``/``.rename(x)``/``.hardlink_to(x)`` (one argument: ``str.replace`` takes two)."""
    found: list[tuple[str, int, str]] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            what = ""
            if isinstance(node, ast.Attribute) and node.attr == "O_DIRECTORY":
                what = "os.O_DIRECTORY"
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                attr, owner = node.func.attr, node.func.value
                module = owner.id if isinstance(owner, ast.Name) else ""
                if module == "os" and attr in _WRITER_CALLS:
                    what = f"os.{attr}"
                elif (
                    module != "os"
                    and attr in ("replace", "rename", "hardlink_to")
                    and len(node.args) == 1
                    and not node.keywords
                ):
                    what = f".{attr}"
            if what:
                found.append((rel, getattr(node, "lineno", 0), what))
    return [f"{rel}:{line} {what}" for rel, line, what in sorted(found)]


def test_there_is_one_file_writer():
    found = file_replacers(REPO / "releasekit")
    # demo/projects/ is the demo components' own source (built without releasekit installed).
    others = [f for f in found if not f.startswith((f"{WRITER}:", "demo/projects/"))]
    assert not others, f"only releasekit/{WRITER} replaces, renames or links files and fsyncs:\n" + "\n".join(
        others
    )
    assert any(f.endswith("os.replace") for f in found) and any(f.endswith("os.fsync") for f in found)


def test_a_second_writer_is_found(tmp_path):
    (tmp_path / "mine.py").write_text(
        "import os\n\ndef put(tmp, dest, d):\n    os.replace(tmp, dest)\n"
        "    fd = os.open(d, os.O_DIRECTORY)\n    os.fsync(fd)\n    dest.with_suffix('.x').rename(dest)\n"
        "    return 'a'.replace('a', 'b')\n",
        encoding="utf-8",
    )
    assert file_replacers(tmp_path) == [
        "mine.py:4 os.replace",
        "mine.py:5 os.O_DIRECTORY",
        "mine.py:6 os.fsync",
        "mine.py:7 .rename",
    ]


# --- one door to a remote ------------------------------------------------------------------------

# The git subcommands that reach a repository URL, and the one module (and its functions) that run
# them: git/mirror.py's fetch_into (refuses a network URL offline) and Mirror._record_default_branch;
# every other module reads another repository through git/mirror.py's fetch_refs (its --mirror first).
_NETWORK_GIT = frozenset({"fetch", "clone", "ls-remote", "remote-https", "archive"})
DOOR = {"git/mirror.py": {"fetch_into", "_record_default_branch"}}


def _subcommand(node: ast.Call) -> str | None:
    """The first word of a call's positional string arguments (a list's or tuple's too) that is
    neither ``git`` nor an option (nor the value of ``-c``/``-C``): the git subcommand, if any."""
    words: list[str] = []
    for arg in node.args:
        items = arg.elts if isinstance(arg, ast.List | ast.Tuple) else [arg]
        words += [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
    skip = False
    for word in words:
        if skip or word == "git":
            skip = False
            continue
        if word.startswith("-"):
            skip = word in ("-c", "-C")
            continue
        return word
    return None


def network_git_calls(root: Path) -> list[str]:
    """``path:line function subcommand`` for every call that passes ``fetch``/``clone``/``ls-remote``
    (or ``archive --remote``) as a git subcommand: ``git.run("fetch", …)``, ``run_git(["clone", …])``,
    ``subprocess.run(["git", "ls-remote", …])``."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]:
            for node in ast.walk(func):
                if not isinstance(node, ast.Call):
                    continue
                word = _subcommand(node)
                if word in _NETWORK_GIT:
                    found.append(f"{rel}:{node.lineno} {func.name} {word}")
    return sorted(set(found))


def test_only_the_door_runs_git_on_a_url():
    """Every repository through the same door (issue 44): no module but git/mirror.py's fetch_into
    and _record_default_branch runs git fetch/clone/ls-remote, so --mirror, RELEASEKIT_MIRRORS and
    --offline hold for every URL a command reads."""
    found = network_git_calls(REPO / "releasekit")
    others = [
        f
        for f in found
        if not (f.split(":", 1)[0] in DOOR and f.split(" ")[1] in DOOR[f.split(":", 1)[0]])
        and not f.startswith("demo/projects/")
    ]
    assert not others, "only git/mirror.py's door reads a URL with git:\n" + "\n".join(others)
    assert any(" fetch_into fetch" in f for f in found) and any(" ls-remote" in f for f in found)


def test_a_second_door_is_found(tmp_path):
    (tmp_path / "mine.py").write_text(
        "import subprocess\n\ndef get(git, url):\n    git.run('fetch', '--quiet', '--', url, 'x')\n"
        "    subprocess.run(['git', '-c', 'a=b', 'clone', url])\n    run_git(['ls-remote', url])\n"
        "    git.run('rev-parse', 'fetch')\n",
        encoding="utf-8",
    )
    assert network_git_calls(tmp_path) == [
        "mine.py:4 get fetch",
        "mine.py:5 get clone",
        "mine.py:6 get ls-remote",
    ]
