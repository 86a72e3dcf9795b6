"""The release binaries build and start."""
import subprocess


def test_placed_help_exits_zero(placed_bin):
    out = subprocess.run([placed_bin, "--help"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0
    assert "placed" in out.stdout


def test_placectl_help_exits_zero(placectl_bin):
    out = subprocess.run([placectl_bin, "--help"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0
    assert "placectl" in out.stdout
