"""Landing positions on canonical's first-parent history follow the plan's order and ``after:``."""

from __future__ import annotations

from releasekit.findings import Findings
from releasekit.manifest import parse_pr_reference
from releasekit.plan.checks.context import PlanContext, short


class MergeOrder:
    name = "merge-order"
    codes = ("MERGED_OUT_OF_ORDER", "AFTER_VIOLATED")

    def run(self, ctx: PlanContext) -> Findings:
        findings = Findings()
        for name, cs in ctx.components.items():
            plan = cs.comp.merge_plan
            for j, later in enumerate(plan):
                sj = cs.states.get(later.pr)
                if not sj or not sj.merged or sj.landed_index is None:
                    continue
                explicit = {parse_pr_reference(r, name) for r in later.after}
                inverted = []
                for earlier in plan[:j]:
                    si = cs.states.get(earlier.pr)
                    if si and si.merged and si.landed_index is not None and si.landed_index > sj.landed_index:
                        inverted.append(earlier.pr)
                if inverted:
                    named = [
                        n for n in inverted if any(k.component == name and k.number == n for k in explicit)
                    ]
                    detail = f" (its 'after:' names #{', #'.join(map(str, named))})" if named else ""
                    findings.add(
                        "MERGED_OUT_OF_ORDER",
                        f"PR #{later.pr} landed at {short(sj.landed_at)} before #{', #'.join(map(str, inverted))}, "
                        f"which the plan merges first{detail}",
                        component=name,
                        pr=later.pr,
                    )
                for key in explicit:
                    target = ctx.components.get(key.component)
                    if target is None:
                        continue
                    st = target.states.get(key.number)
                    if st is None or not st.merged:
                        findings.add(
                            "AFTER_VIOLATED",
                            f"PR #{later.pr} is merged but {key}, which it must land after, is not",
                            component=name,
                            pr=later.pr,
                        )
                    elif key.component == name and key.number not in {p.pr for p in plan[:j]}:
                        # A same-repository target outside the earlier plan entries (an already-canonical PR).
                        if st.landed_index is not None and st.landed_index > sj.landed_index:
                            findings.add(
                                "AFTER_VIOLATED",
                                f"PR #{later.pr} landed at {short(sj.landed_at)} before #{key.number}, which it must land after",
                                component=name,
                                pr=later.pr,
                            )
                    elif key.component != name:
                        # Different repositories share no history: compare when each landing commit was made.
                        mine, theirs = cs.landed_time(later.pr), target.landed_time(key.number)
                        if mine is not None and theirs is not None and mine < theirs:
                            findings.add(
                                "AFTER_VIOLATED",
                                f"PR #{later.pr} landed at {mine} (committer time) before {key} landed at {theirs}",
                                component=name,
                                pr=later.pr,
                            )
        return findings
