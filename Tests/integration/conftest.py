"""Shared fixtures for the integration tests: paths to the built binaries and the repository's data, a places
database imported once per session, and placed daemons serving varlink on a per-test socket."""
import pathlib
import shutil
import subprocess

import pytest

from harness import PlacedService, bin_path

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The repository's own data only: a missing file fails the tests that read it.
DATA = ROOT / "data"
HELSINKI = DATA / "helsinki-center.osm.pbf"




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
def places_db(tmp_path_factory, placectl_bin) -> pathlib.Path:
    """The Helsinki extract imported once; tests copy it, never change it."""
    path = tmp_path_factory.mktemp("places") / "places.db"
    out = subprocess.run([placectl_bin, "import", HELSINKI, "--db", path], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return path


@pytest.fixture
def start_placed(placed_bin, places_db, tmp_path):
    """Starts placed on a copy of the places database in `directory` (default: the test's tmp_path),
    serving varlink on DIRECTORY/sock; by default at a static position in central Helsinki, waiting for
    ranking 1. Every daemon started is stopped at the end of the test."""
    running = []

    def start(*arguments, directory=None, **options):
        directory = pathlib.Path(directory or tmp_path)
        directory.mkdir(parents=True, exist_ok=True)
        if not (directory / "places.db").exists():
            shutil.copy(places_db, directory / "places.db")
        service = PlacedService(placed_bin, directory, *arguments, **options)
        running.append(service)
        service.wait_ready()
        return service

    yield start
    for service in running:
        service.stop()
