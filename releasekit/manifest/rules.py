"""Rules a manifest must satisfy beyond its types: each rule is one small function.

Every rule takes the typed manifest plus the raw data and its source map, and adds
findings with stable codes and file:line:column locations.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name

from releasekit.findings import Findings, Severity
from releasekit.manifest.loader import Path_, SourceMap, field_path
from releasekit.manifest.models import (
    LOCKABLE_KEYS,
    REQUIRED_DISPOSITIONS,
    TO_BE_LOCKED,
    CanonicalChange,
    GitComponent,
    Manifest,
    PlannedPR,
)


@dataclass(frozen=True)
class PRKey:
    component: str
    number: int

    def __str__(self) -> str:
        return f"{self.component}#{self.number}"


def parse_pr_reference(ref: int | str, component: str) -> PRKey:
    """``108`` means this component's PR 108; ``b12x#34`` names another component's."""
    if isinstance(ref, int):
        return PRKey(component, ref)
    if "#" in ref:
        comp, _, num = ref.partition("#")
        return PRKey(comp, int(num))
    return PRKey(component, int(ref))


class RuleContext:
    def __init__(
        self, manifest: Manifest, raw: dict[str, Any], source: SourceMap, findings: Findings
    ) -> None:
        self.manifest = manifest
        self.raw = raw
        self.source = source
        self.findings = findings

    def add(
        self, code: str, message: str, path: Path_, *, severity: Severity = Severity.error, **where: Any
    ) -> None:
        line, col = self.source.locate(path)
        self.findings.add(
            code,
            message,
            severity=severity,
            file=self.source.file,
            line=line,
            column=col,
            field=field_path(path),
            **where,
        )


Rule = Callable[[RuleContext], None]


def _git(ctx: RuleContext) -> Iterator[tuple[str, GitComponent]]:
    yield from ctx.manifest.git_components().items()


def rule_unique_pr_numbers(ctx: RuleContext) -> None:
    for name, comp in _git(ctx):
        seen: dict[int, str] = {}
        entries: list[tuple[int, str, Path_]] = []
        entries += [
            (p.pr, "merge_plan", ("components", name, "merge_plan", i, "pr"))
            for i, p in enumerate(comp.merge_plan)
        ]
        entries += [
            (c.pr, "already_canonical", ("components", name, "already_canonical", i, "pr"))
            for i, c in enumerate(comp.already_canonical)
            if c.pr is not None
        ]
        entries += [
            (c.pr, "closed", ("components", name, "closed", i, "pr")) for i, c in enumerate(comp.closed)
        ]
        for number, section, path in entries:
            if number in seen:
                ctx.add(
                    "DUPLICATE_PR",
                    f"PR #{number} appears in {seen[number]} and again in {section}",
                    path,
                    component=name,
                    pr=number,
                )
            else:
                seen[number] = section


def _known_prs(ctx: RuleContext) -> dict[PRKey, str]:
    """Every PR the manifest names, with what it is: planned, canonical, closed or superseded."""
    known: dict[PRKey, str] = {}
    for name, comp in _git(ctx):
        for p in comp.merge_plan:
            known[PRKey(name, p.pr)] = "planned"
        for c in comp.already_canonical:
            if c.pr is not None:
                known[PRKey(name, c.pr)] = "already canonical"
        for closed in comp.closed:
            known.setdefault(PRKey(name, closed.pr), "closed")
        for entry in comp.superseding():
            for s in entry.supersedes:
                known.setdefault(PRKey(name, s), "superseded")
    return known


def rule_after_targets(ctx: RuleContext) -> None:
    known = _known_prs(ctx)
    components = ctx.manifest.components
    for name, comp in _git(ctx):
        for i, planned in enumerate(comp.merge_plan):
            for j, ref in enumerate(planned.after):
                path = ("components", name, "merge_plan", i, "after", j)
                target = parse_pr_reference(ref, name)
                if target.component not in components:
                    ctx.add(
                        "UNKNOWN_COMPONENT",
                        f"'after: {ref}' names component '{target.component}', which this manifest does not have",
                        path,
                        component=name,
                        pr=planned.pr,
                    )
                    continue
                if target == PRKey(name, planned.pr):
                    ctx.add(
                        "SELF_DEPENDENCY",
                        f"PR #{planned.pr} lists itself in 'after'",
                        path,
                        component=name,
                        pr=planned.pr,
                    )
                    continue
                state = known.get(target)
                if state is None:
                    ctx.add(
                        "UNKNOWN_AFTER_TARGET",
                        f"PR #{planned.pr} must land after {target}, which is not in any merge plan or canonical list",
                        path,
                        component=name,
                        pr=planned.pr,
                    )
                elif state in ("closed", "superseded"):
                    ctx.add(
                        "AFTER_TARGET_NOT_MERGED",
                        f"PR #{planned.pr} must land after {target}, which is {state} and must not be merged",
                        path,
                        component=name,
                        pr=planned.pr,
                    )


def rule_arrived_in(ctx: RuleContext) -> None:
    """``arrived_in:`` names the PR whose merge brought this one: another PR of the same merge plan."""
    for name, comp in _git(ctx):
        planned = {p.pr for p in comp.merge_plan}
        for i, entry in enumerate(comp.merge_plan):
            carrier = entry.arrived_in
            if carrier is not None and (carrier == entry.pr or carrier not in planned):
                ctx.add(
                    "UNKNOWN_ARRIVED_IN",
                    f"PR #{entry.pr} 'arrived_in: {carrier}' must name another PR of {name}'s merge plan",
                    ("components", name, "merge_plan", i, "arrived_in"),
                    component=name,
                    pr=entry.pr,
                )


def _dependency_graph(ctx: RuleContext) -> dict[PRKey, list[PRKey]]:
    graph: dict[PRKey, list[PRKey]] = {}
    for name, comp in _git(ctx):
        for planned in comp.merge_plan:
            graph[PRKey(name, planned.pr)] = [parse_pr_reference(r, name) for r in planned.after]
    return graph


def find_cycle(graph: dict[PRKey, list[PRKey]]) -> list[PRKey] | None:
    """A dependency cycle as a path that ends where it starts, or None."""
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(graph, white)
    stack: list[PRKey] = []

    def visit(node: PRKey) -> list[PRKey] | None:
        color[node] = grey
        stack.append(node)
        for nxt in graph.get(node, []):
            if nxt not in graph:
                continue
            if color[nxt] == grey:
                return [*stack[stack.index(nxt) :], nxt]
            if color[nxt] == white:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        color[node] = black
        return None

    for node in sorted(graph, key=str):
        if color[node] == white:
            found = visit(node)
            if found:
                return found
    return None


def rule_no_cycles(ctx: RuleContext) -> None:
    cycle = find_cycle(_dependency_graph(ctx))
    if cycle:
        first = cycle[0]
        comp = ctx.manifest.components[first.component]
        index = next(i for i, p in enumerate(comp.merge_plan) if p.pr == first.number)  # type: ignore[union-attr]
        ctx.add(
            "DEPENDENCY_CYCLE",
            "merge plan dependencies form a cycle: " + " -> ".join(str(k) for k in cycle),
            ("components", first.component, "merge_plan", index, "after"),
            component=first.component,
            pr=first.number,
        )


def rule_order_respects_after(ctx: RuleContext) -> None:
    for name, comp in _git(ctx):
        position = {p.pr: i for i, p in enumerate(comp.merge_plan)}
        for i, planned in enumerate(comp.merge_plan):
            for j, ref in enumerate(planned.after):
                target = parse_pr_reference(ref, name)
                if target.component == name and target.number in position and position[target.number] > i:
                    ctx.add(
                        "ORDER_CONTRADICTS_AFTER",
                        f"PR #{planned.pr} is listed at position {i + 1} but must land after #{target.number}, listed at position {position[target.number] + 1}",
                        ("components", name, "merge_plan", i, "after", j),
                        component=name,
                        pr=planned.pr,
                    )


def rule_superseded_not_planned(ctx: RuleContext) -> None:
    for name, comp in _git(ctx):
        planned = {p.pr for p in comp.merge_plan}
        canonical = {c.pr for c in comp.already_canonical if c.pr is not None}
        sections: tuple[tuple[str, Sequence[PlannedPR | CanonicalChange]], ...] = (
            ("merge_plan", comp.merge_plan),
            ("already_canonical", comp.already_canonical),
        )
        for section, entries in sections:
            for i, entry in enumerate(entries):
                label = f"#{entry.pr}" if entry.pr is not None else f"commit {getattr(entry, 'commit', '')}"
                for j, sup in enumerate(entry.supersedes):
                    path = ("components", name, section, i, "supersedes", j)
                    if sup in planned:
                        ctx.add(
                            "SUPERSEDED_PR_PLANNED",
                            f"PR #{sup} is superseded by {label} but is also in the merge plan",
                            path,
                            component=name,
                            pr=sup,
                        )
                    elif sup in canonical:
                        ctx.add(
                            "SUPERSEDED_PR_CANONICAL",
                            f"PR #{sup} is superseded by {label} but is also listed as already canonical",
                            path,
                            component=name,
                            pr=sup,
                        )
                    if entry.pr is not None and sup == entry.pr:
                        ctx.add(
                            "SELF_SUPERSESSION", f"{label} supersedes itself", path, component=name, pr=sup
                        )


_PLACEHOLDER = re.compile(
    r"(?i)\b(TODO|TBD|FIXME|XXX)\b|<[A-Za-z_][A-Za-z0-9_ -]{0,30}>|\$\{[^}]*\}|\bto-be-locked\b|\bchangeme\b"
)


def _walk(data: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _walk(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _walk(v, (*path, i))
    else:
        yield path, data


def rule_placeholders(ctx: RuleContext) -> None:
    """``to-be-locked`` only where a lock resolves the value; no other placeholder anywhere."""
    for path, value in _walk(ctx.raw):
        if not isinstance(value, str):
            continue
        key = path[-1] if path else ""
        if value == TO_BE_LOCKED and key in LOCKABLE_KEYS:
            continue
        match = _PLACEHOLDER.search(value)
        if match:
            ctx.add(
                "UNRESOLVED_PLACEHOLDER",
                f"placeholder {match.group(0)!r}; only {', '.join(sorted(LOCKABLE_KEYS))} may be '{TO_BE_LOCKED}'",
                path,
            )


def rule_pins_consistent(ctx: RuleContext) -> None:
    m = ctx.manifest
    seen: dict[str, int] = {}
    for i, pin in enumerate(m.pins):
        key = canonicalize_name(pin.package)
        if key in seen:
            ctx.add("DUPLICATE_PIN", f"{pin.package} is pinned twice", ("pins", i, "package"))
        seen[key] = i
    wheels = {canonicalize_name(w.distribution): (n, w) for n, w in m.wheel_components().items()}
    for i, pin in enumerate(m.pins):
        hit = wheels.get(canonicalize_name(pin.package))
        if hit and hit[1].version != pin.version:
            ctx.add(
                "PIN_CONFLICT",
                f"pin {pin.package}=={pin.version} disagrees with component '{hit[0]}' ({hit[1].requirement})",
                ("pins", i, "version"),
                component=hit[0],
            )
    for i, pattern in enumerate(m.policy.forbidden_distributions):
        for name, wheel in m.wheel_components().items():
            dist = canonicalize_name(wheel.distribution)
            allowed = any(fnmatch.fnmatch(dist, canonicalize_name(a)) for a in m.policy.allowed_distributions)
            if fnmatch.fnmatch(dist, pattern) and not allowed:
                ctx.add(
                    "FORBIDDEN_COMPONENT",
                    f"component '{name}' ({wheel.distribution}) matches forbidden distribution pattern '{pattern}'",
                    ("policy", "forbidden_distributions", i),
                    component=name,
                )


def rule_exclusions(ctx: RuleContext) -> None:
    seen: set[str] = set()
    for i, ex in enumerate(ctx.manifest.exclusions):
        path = ("exclusions", i)
        if ex.id in seen:
            ctx.add("DUPLICATE_EXCLUSION", f"exclusion id '{ex.id}' is used twice", (*path, "id"))
        seen.add(ex.id)
        if ex.component is not None and ex.component not in ctx.manifest.components:
            ctx.add(
                "UNKNOWN_COMPONENT",
                f"exclusion '{ex.id}' names component '{ex.component}', which this manifest does not have",
                (*path, "component"),
            )
        if ex.pr is not None and ex.component is not None:
            comp = ctx.manifest.components.get(ex.component)
            if isinstance(comp, GitComponent) and ex.pr in {p.pr for p in comp.merge_plan}:
                ctx.add(
                    "EXCLUDED_PR_PLANNED",
                    f"PR #{ex.pr} is both excluded ('{ex.id}') and in the merge plan",
                    (*path, "pr"),
                    component=ex.component,
                    pr=ex.pr,
                )
        if not ex.checkable():
            required = ex.disposition in REQUIRED_DISPOSITIONS
            ctx.add(
                "EXCLUSION_NOT_CHECKABLE",
                f"exclusion '{ex.id}' ({ex.disposition}) gives no pr, upstream, commits, patch_ids, paths or message_pattern: "
                "it is recorded, but plan check cannot detect it",
                path,
                severity=Severity.warning if required else Severity.info,
            )


def rule_validation_matrix(ctx: RuleContext) -> None:
    spec = ctx.manifest.validation
    ids: set[str] = set()
    forbidden_env = spec.forbidden.env
    forbidden_args = spec.forbidden.args
    for i, cell in enumerate(spec.cells):
        path = ("validation", "cells", i)
        if cell.id in ids:
            ctx.add("DUPLICATE_CELL", f"cell id '{cell.id}' is used twice", (*path, "id"), cell=cell.id)
        ids.add(cell.id)
        for name, value in cell.env.items():
            for rule in forbidden_env:
                fname, _, fval = rule.partition("=")
                if name == fname and (not fval or fval == value):
                    ctx.add(
                        "FORBIDDEN_SWITCH",
                        f"cell '{cell.id}' sets {name}={value}, which the manifest forbids ({spec.forbidden.reason or 'forbidden switch'})",
                        (*path, "env", name),
                        cell=cell.id,
                    )
        for j, arg in enumerate(cell.extra_args):
            flag = arg.split("=", 1)[0]
            if flag in forbidden_args or arg in forbidden_args:
                ctx.add(
                    "FORBIDDEN_SWITCH",
                    f"cell '{cell.id}' passes {arg}, which the manifest forbids ({spec.forbidden.reason or 'forbidden switch'})",
                    (*path, "extra_args", j),
                    cell=cell.id,
                )
        for j, check in enumerate(cell.checks):
            for dataset in (
                getattr(check, "dataset", None) or getattr(check, "prompts", None),
                getattr(check, "fewshot", None),
            ):
                if dataset is not None and dataset not in spec.datasets:
                    ctx.add(
                        "UNKNOWN_DATASET",
                        f"cell '{cell.id}' check {check.kind} uses dataset '{dataset}', which validation.datasets does not define",
                        (*path, "checks", j),
                        cell=cell.id,
                    )
            named = getattr(check, "baseline", None)
            if named is not None and named not in spec.baselines:
                ctx.add(
                    "UNKNOWN_BASELINE",
                    f"cell '{cell.id}' check {check.kind} names baseline '{named}', which validation.baselines does not define",
                    (*path, "checks", j, "baseline"),
                    cell=cell.id,
                )
            baseline = getattr(check, "baseline_metric", None)
            # A receipt baseline's values are known only when the cell runs.
            candidates = [spec.baselines[named]] if named in spec.baselines else list(spec.baselines.values())
            if baseline is not None and not any(
                baseline in b.values or b.receipt is not None for b in candidates
            ):
                ctx.add(
                    "UNKNOWN_BASELINE_METRIC",
                    f"cell '{cell.id}' holds {check.kind} to baseline metric '{baseline}', which no baseline defines",
                    (*path, "checks", j),
                    cell=cell.id,
                )
        for j, gate in enumerate(cell.gates):
            if gate.baseline is not None:
                base = spec.baselines.get(gate.baseline)
                if base is None:
                    ctx.add(
                        "UNKNOWN_BASELINE",
                        f"cell '{cell.id}' gate on {gate.metric} names baseline '{gate.baseline}', which validation.baselines does not define",
                        (*path, "gates", j, "baseline"),
                        cell=cell.id,
                    )
                elif base.receipt is None and gate.metric not in base.values:
                    ctx.add(
                        "UNKNOWN_BASELINE_METRIC",
                        f"baseline '{gate.baseline}' has no value for {gate.metric}",
                        (*path, "gates", j, "metric"),
                        cell=cell.id,
                    )
        if cell.speculative.mode == "off" and any(c.kind == "acceptance" for c in cell.checks):
            ctx.add(
                "ACCEPTANCE_WITHOUT_SPECULATION",
                f"cell '{cell.id}' checks speculative acceptance with speculation off",
                path,
                cell=cell.id,
            )
        if cell.parallel.dcp > 1 and cell.parallel.tp % cell.parallel.dcp:
            ctx.add(
                "BAD_PARALLELISM",
                f"cell '{cell.id}': dcp {cell.parallel.dcp} does not divide tp {cell.parallel.tp}",
                (*path, "parallel"),
                cell=cell.id,
            )


_TOOLCHAIN_ITEMS = frozenset({"pytorch", "cuda", "nccl", "cudnn", "python", "base-image"})


def rule_provenance_items(ctx: RuleContext) -> None:
    for i, item in enumerate(ctx.manifest.provenance.record):
        if item not in ctx.manifest.components and item not in _TOOLCHAIN_ITEMS:
            ctx.add(
                "UNKNOWN_PROVENANCE_ITEM",
                f"provenance.record names '{item}', which is neither a component nor one of {', '.join(sorted(_TOOLCHAIN_ITEMS))}",
                ("provenance", "record", i),
            )


RULES: tuple[Rule, ...] = (
    rule_unique_pr_numbers,
    rule_after_targets,
    rule_arrived_in,
    rule_no_cycles,
    rule_order_respects_after,
    rule_superseded_not_planned,
    rule_placeholders,
    rule_pins_consistent,
    rule_exclusions,
    rule_validation_matrix,
    rule_provenance_items,
)


def check_rules(manifest: Manifest, raw: dict[str, Any], source: SourceMap) -> Findings:
    findings = Findings()
    ctx = RuleContext(manifest, raw, source, findings)
    for rule in RULES:
        rule(ctx)
    return findings
