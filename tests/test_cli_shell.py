from cli_run import invoke


def test_version():
    r = invoke("--version")
    assert r.returncode == 0
    assert r.stdout.startswith("releasekit ")


def test_unknown_command_is_one_line_exit_2():
    r = invoke("no-such-command")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
