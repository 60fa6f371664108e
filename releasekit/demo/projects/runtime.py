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
"""

INIT_V1 = '''\
"""releasekit demo runtime."""

from rkdemo_runtime._version import __commit__, __version__

__all__ = ["__commit__", "__version__", "greet"]


def greet() -> str:
    return "hello"
'''

SCALE = '''\
def scale(values, factor):
    return [v * factor for v in values]
'''

INIT_PR2 = INIT_V1.replace('return "hello"', 'return f"hello from rkdemo {__version__}"')
INIT_PR3 = INIT_V1.replace('return "hello"', 'return "hello from rkdemo"')
