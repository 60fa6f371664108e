"""Files of the demo's pure-Python component, commit by commit (path -> content)."""

PYPROJECT = """\
[build-system]
requires = []
build-backend = "rkdemo_backend"
backend-path = ["_build"]

[project]
name = "rkdemo-runtime"
description = "releasekit demo: a pure-Python runtime package"
dynamic = ["version"]

[tool.rkdemo]
package = "rkdemo_runtime"
base-version = "0.1.0"

[tool.ruff]
line-length = 110
"""

INIT_V1 = '''\
"""releasekit demo runtime."""

from rkdemo_runtime._version import __commit__, __version__

__all__ = ["__commit__", "__version__", "greet"]


def greet() -> str:
    return "hello"
'''

SCALE = """\
def scale(values, factor):
    return [v * factor for v in values]
"""

INIT_PR2 = INIT_V1.replace('return "hello"', 'return f"hello from rkdemo {__version__}"')
INIT_PR3 = INIT_V1.replace('return "hello"', 'return "hello from rkdemo"')

# The component's own tests: they import the installed package (the image's), never this checkout.
TEST_GREET = '''\
"""rkdemo-runtime: tests of the greeting and the version."""

from pathlib import Path

import rkdemo_runtime

FIXTURES = Path(__file__).parent / "fixtures"


def test_greet_says_hello():
    assert rkdemo_runtime.greet().startswith("hello")


def test_greet_matches_the_fixture():
    expected = (FIXTURES / "greetings.txt").read_text(encoding="utf-8").split()[0]
    assert rkdemo_runtime.greet().split()[0] == expected


def test_version_is_a_public_version():
    # Known since the first commit: the git-derived version carries a local segment
    # (+g<commit>) that a package index refuses. It fails on the baseline image too.
    assert "+" not in rkdemo_runtime.__version__
'''

# A planted hygiene problem: trailing whitespace in a test fixture (git diff --check finds it).
GREETINGS_FIXTURE = "hello \n"

TEST_GPU = '''\
"""rkdemo-runtime: a test that needs a GPU (its suite declares needs: {gpus: 1})."""

import glob

import pytest


@pytest.mark.skipif(not glob.glob("/dev/nvidia[0-9]*"), reason="needs an NVIDIA GPU")
def test_a_gpu_is_visible():
    assert glob.glob("/dev/nvidia[0-9]*")
'''

TEST_SCALE = '''\
"""rkdemo-runtime: tests of the scale helper."""

from rkdemo_runtime.scale import scale


def test_scale_multiplies_each_value():
    assert scale([1, 2, 3], 2) == [2, 4, 6]
'''
