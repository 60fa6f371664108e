import subprocess
import sys


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "releasekit", *args], capture_output=True, text=True)


def test_version():
    r = run("--version")
    assert r.returncode == 0
    assert r.stdout.startswith("releasekit ")


def test_unknown_command_is_one_line_exit_2():
    r = run("no-such-command")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
