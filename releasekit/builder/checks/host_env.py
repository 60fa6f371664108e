"""Host variables that would change a build's output must be declared by the recipe, or the build is refused."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from releasekit.builder.hygiene import output_changing
from releasekit.findings import Findings
from releasekit.manifest.models import BuildRecipe


@dataclass(frozen=True)
class HostEnvironmentContext:
    host: Mapping[str, str]  # the environment releasekit runs in
    recipes: Mapping[str, BuildRecipe]  # component name -> its build recipe


class UndeclaredHostEnvironmentCheck:
    name = "host-environment"
    codes = ("BUILD_ENV_UNDECLARED",)

    def run(self, context: HostEnvironmentContext) -> Findings:
        found = Findings()
        for variable in sorted(v for v in context.host if output_changing(v)):
            undeclared = [
                name
                for name, recipe in context.recipes.items()
                if variable not in recipe.env and variable not in recipe.pass_env
            ]
            if undeclared:
                found.add(
                    "BUILD_ENV_UNDECLARED",
                    f"{variable} is set in the environment and changes build output, but the manifest does not "
                    f"declare it for {', '.join(undeclared)} (unset it, or declare it in build.env / build.pass_env)",
                    component=undeclared[0],
                )
        return found
