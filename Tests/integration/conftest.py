"""Shared fixtures for the integration tests: paths to the built binaries and the shared data."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"


def bin_path(config: str, name: str) -> pathlib.Path:
    out = subprocess.run(
        ["swift", "build", "-c", config, "--show-bin-path"], cwd=ROOT, check=True,
        capture_output=True, text=True).stdout.strip()
    return pathlib.Path(out) / name


@pytest.fixture(scope="session")
def placed_bin() -> pathlib.Path:
    path = bin_path("release", "placed")
    assert path.exists(), "build placed first: swift build -c release"
    return path


@pytest.fixture(scope="session")
def placectl_bin() -> pathlib.Path:
    path = bin_path("release", "placectl")
    assert path.exists(), "build placectl first: swift build -c release"
    return path


@pytest.fixture(scope="session")
def places_db(placectl_bin, tmp_path_factory) -> pathlib.Path:
    """The bundled Helsinki extract imported once per session; copy it before a test writes beside it."""
    path = tmp_path_factory.mktemp("places") / "places.db"
    subprocess.run([placectl_bin, "import", str(ROOT / "data" / "helsinki-center.osm.pbf"), "--db", str(path)],
                   check=True, capture_output=True)
    return path
