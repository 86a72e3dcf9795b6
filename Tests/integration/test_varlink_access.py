"""Who may do what on the varlink socket: anyone may connect (0666), and the daemon checks the peer's
credentials (SO_PEERCRED, SO_PEERGROUPS): root and members of group placed may read, Select and
Refresh; members of group placed-read may read; everyone else is refused by name."""
import grp
import json
import os
import pwd
import resource
import select
import socket
import stat
import subprocess
import tempfile
import time

import pytest
import varlink

from harness import PLACES, open_varlink

NOBODY = pwd.getpwnam("nobody")


@pytest.fixture
def open_directory():
    """A directory everyone may traverse (pytest's tmp_path is private to root)."""
    path = tempfile.mkdtemp(prefix="placed-access-")
    os.chmod(path, 0o755)
    yield __import__("pathlib").Path(path)
    subprocess.run(["rm", "-rf", path], check=True)


@pytest.fixture(scope="module")
def placed_group():
    subprocess.run(["groupadd", "-f", "placed"], check=True)
    return grp.getgrnam("placed").gr_gid


@pytest.fixture(scope="module")
def reader_group():
    subprocess.run(["groupadd", "-f", "placed-read"], check=True)
    return grp.getgrnam("placed-read").gr_gid


def as_user(uid, gid, groups, action):
    """Runs `action()` in a forked child with these credentials (set before it connects, so the
    kernel records them); returns what it returned, or {"error": name} for a varlink error."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 0
        try:
            os.close(read_end)
            os.setgroups(groups)
            os.setgid(gid)
            os.setuid(uid)
            try:
                result = action()
            except varlink.VarlinkError as error:
                result = {"error": error.error()}
            except OSError as error:
                result = {"errno": error.errno}
            os.write(write_end, json.dumps(result).encode())
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and data, "the child failed"
    return json.loads(data)


def calls(socket, *names):
    """An action making each call in `names` on its own connection, results by name."""
    def run():
        results = {}
        for name in names:
            with open_varlink(socket) as places:
                try:
                    if name == "Select":
                        try:
                            chosen = places.Current()["places"][0]["id"]
                        except varlink.VarlinkError:  # not a reader: try a place anyway
                            chosen = "osm:node/1"
                        results[name] = places.Select(chosen)
                    elif name == "GetInfo":
                        with open_varlink(socket, "org.varlink.service") as service:
                            results[name] = service.GetInfo()
                    else:
                        results[name] = getattr(places, name)()
                except varlink.VarlinkError as error:
                    results[name] = {"error": error.error()}
        return results
    return run


def test_anyone_may_connect_but_only_readers_read(start_placed, open_directory):
    placed = start_placed(directory=open_directory)
    info = placed.socket.stat()
    assert stat.S_ISSOCK(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o666
    got = as_user(NOBODY.pw_uid, NOBODY.pw_gid, [],
                  calls(placed.socket, "Current", "Status", "History", "Select", "Refresh", "GetInfo"))
    for name in ["Current", "Status", "History", "Select", "Refresh"]:
        assert got[name] == {"error": PLACES + ".PermissionDenied"}, name
    assert PLACES in got["GetInfo"]["interfaces"], "introspection reveals nothing personal and stays open"
    with placed.open() as places:
        assert places.History() == {"markers": []} and "marker" not in places.Status(), "nothing recorded"
        assert places.Current()["generation"] == 1, "no refresh happened"


def test_a_member_of_placed_read_may_read_but_not_select_or_refresh(start_placed, open_directory, reader_group):
    placed = start_placed(directory=open_directory)  # after the group exists: placed resolves it at start
    got = as_user(NOBODY.pw_uid, NOBODY.pw_gid, [reader_group],
                  calls(placed.socket, "Current", "Status", "History", "Select", "Refresh"))
    assert got["Current"]["generation"] == 1 and got["Current"]["places"]
    assert got["Status"]["generation"] == 1 and got["History"] == {"markers": []}
    assert got["Select"] == {"error": PLACES + ".PermissionDenied"}
    assert got["Refresh"] == {"error": PLACES + ".PermissionDenied"}
    with placed.open() as places:
        assert places.History() == {"markers": []} and "marker" not in places.Status(), "nothing recorded"
        assert places.Current()["generation"] == 1, "no refresh happened"


@pytest.mark.parametrize("membership", ["supplementary", "primary"])
def test_a_member_of_group_placed_may_select_and_refresh(start_placed, open_directory, placed_group, membership):
    placed = start_placed(directory=open_directory)  # after the group exists: placed resolves it at start
    if membership == "primary":
        got = as_user(NOBODY.pw_uid, placed_group, [], calls(placed.socket, "Select", "Refresh"))
    else:
        got = as_user(NOBODY.pw_uid, NOBODY.pw_gid, [placed_group], calls(placed.socket, "Select", "Refresh"))
    assert got["Select"]["marker"]["selection"] == 1
    assert got["Refresh"] == {}
    with placed.open() as places:
        assert places.History()["markers"][0]["selection"] == 1
        assert places.Current()["generation"] == 2


def test_one_user_cannot_take_every_connection(start_placed, open_directory):
    # The socket is open to everyone: one user's 4,096 connections (each may hold 64 kB of a message)
    # shut everybody else out. Now a user has a quarter of them, as sd-varlink gives, and no more.
    start_placed(directory=open_directory)
    path = str(open_directory / "sock")
    counted_r, counted_w = os.pipe()
    release_r, release_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        kept = b"error"
        try:
            os.close(counted_r)
            os.close(release_w)
            hard = max(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 1200)
            resource.setrlimit(resource.RLIMIT_NOFILE, (1200, hard))
            os.setgroups([])
            os.setgid(NOBODY.pw_gid)
            os.setuid(NOBODY.pw_uid)
            held = []
            for _ in range(1100):
                client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                client.connect(path)
                held.append(client)

            def open_ones():
                poller = select.poll()
                for client in held:
                    poller.register(client, select.POLLRDHUP)
                closed = sum(1 for _, event in poller.poll(0) if event & (select.POLLRDHUP | select.POLLHUP))
                return len(held) - closed

            # placed accepts 256 a wake-up: wait until it has closed what it will (or 20 s, if nothing).
            deadline = time.monotonic() + 20
            while open_ones() > 1024 and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(0.5)  # and no more after that
            kept = b"%d" % open_ones()
        finally:
            os.write(counted_w, kept)
            os.read(release_r, 1)
            os._exit(0)
    os.close(counted_w)
    os.close(release_r)
    try:
        assert select.select([counted_r], [], [], 60)[0], "the child never answered"
        assert os.read(counted_r, 16) == b"1024", "nobody's connections kept"
        with open_varlink(path) as places:
            assert places.Status()["places"] > 0, "root is served while nobody holds its share"
    finally:
        os.write(release_w, b"x")
        os.waitpid(pid, 0)
        os.close(counted_r)
        os.close(release_w)
