"""Who may do what on the varlink socket: it is 0660, and the daemon checks the peer's credentials
(SO_PEERCRED, SO_PEERGROUPS) so that only root and members of group placed may Select or Refresh,
while anyone who can connect may read."""
import grp
import json
import os
import pwd
import stat
import subprocess
import tempfile

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
                        results[name] = places.Select(places.Current()["places"][0]["id"])
                    else:
                        results[name] = getattr(places, name)()
                except varlink.VarlinkError as error:
                    results[name] = {"error": error.error()}
        return results
    return run


def test_socket_is_0660_and_closed_to_others(start_placed, open_directory):
    placed = start_placed(directory=open_directory)
    info = placed.socket.stat()
    assert stat.S_ISSOCK(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o660
    assert (info.st_uid, info.st_gid) == (0, 0)
    got = as_user(NOBODY.pw_uid, NOBODY.pw_gid, [], calls(placed.socket, "Current"))
    assert got == {"errno": 13}, "EACCES for a user outside the socket's group"


def test_a_user_outside_group_placed_may_read_but_not_select_or_refresh(start_placed, open_directory):
    placed = start_placed(directory=open_directory)
    os.chmod(placed.socket, 0o666)
    got = as_user(NOBODY.pw_uid, NOBODY.pw_gid, [],
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
    os.chown(placed.socket, 0, placed_group)  # as an operator would: the socket's group is placed
    if membership == "primary":
        got = as_user(NOBODY.pw_uid, placed_group, [], calls(placed.socket, "Select", "Refresh"))
    else:
        got = as_user(NOBODY.pw_uid, NOBODY.pw_gid, [placed_group], calls(placed.socket, "Select", "Refresh"))
    assert got["Select"]["marker"]["selection"] == 1
    assert got["Refresh"] == {}
    with placed.open() as places:
        assert places.History()["markers"][0]["selection"] == 1
        assert places.Current()["generation"] == 2
