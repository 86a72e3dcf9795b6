"""A booted systemd in a container, for the system tests: the host's root as the lower layer of an overlay
(so the container has the host's Debian 12 packages), a private upper layer and network, a fresh
machine id, systemd-nspawn --boot. Commands run inside through nsenter, as root or as any user."""
import ctypes
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _end_with_parent():
    """In the child before exec: SIGTERM when the test process dies however it dies, so nspawn powers
    the container off instead of leaving it running."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class ContainerError(AssertionError):
    """The container could not be set up: a failure with the reason, never a skip."""


class Result:
    def __init__(self, completed):
        self.returncode = completed.returncode
        self.stdout = completed.stdout
        self.stderr = completed.stderr

    def __repr__(self):
        return "exit %d\nstdout: %s\nstderr: %s" % (self.returncode, self.stdout, self.stderr)


class Container:
    """One booted container. `root` is its file system as the host sees it (the merged overlay)."""

    def __init__(self, name):
        self.name = name
        self.base = pathlib.Path(tempfile.mkdtemp(prefix="placed-%s-" % name, dir="/var/tmp"))
        self.root = self.base / "root"
        self.console = self.base / "console.log"
        self.nspawn = None
        self.pid = None

    # --- life cycle -------------------------------------------------------------------------------

    def boot(self, timeout=90):
        for tool in ("systemd-nspawn", "nsenter", "setpriv"):
            if not shutil.which(tool):
                raise ContainerError("%s is missing: apt-get install systemd-container util-linux" % tool)
        if os.geteuid() != 0:
            raise ContainerError("the system tests boot a container and need root")
        upper, work = self.base / "upper", self.base / "work"
        for d in (upper, work, self.root):
            d.mkdir()
        mounted = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                                  "lowerdir=/,upperdir=%s,workdir=%s" % (upper, work), str(self.root)],
                                 capture_output=True, text=True)
        if mounted.returncode != 0:
            raise ContainerError("cannot mount the overlay on %s: %s" % (self.root, mounted.stderr.strip()))
        # An empty machine id: systemd makes a new one at boot, as on a first boot.
        (self.root / "etc" / "machine-id").write_text("")
        # This sandbox's Docker-style policy-rc.d forbids starting services from maintainer scripts;
        # a booted Debian has none.
        (self.root / "usr" / "sbin" / "policy-rc.d").unlink(missing_ok=True)
        with open(self.console, "w") as console:
            self.nspawn = subprocess.Popen(
                ["systemd-nspawn", "--quiet", "-D", str(self.root), "--boot", "--register=no", "--keep-unit",
                 "--private-network", "--console=read-only", "--machine=placed-%s" % self.name.replace("_", "-")],
                stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_end_with_parent)
        deadline = time.monotonic() + timeout
        while self.pid is None:
            if self.nspawn.poll() is not None:
                raise ContainerError("systemd-nspawn exited with %d before booting:\n%s"
                                     % (self.nspawn.returncode, self.console.read_text()[-3000:]))
            if time.monotonic() > deadline:
                raise ContainerError("the container's init did not start:\n" + self.console.read_text()[-3000:])
            children = subprocess.run(["pgrep", "-P", str(self.nspawn.pid)], capture_output=True, text=True)
            for pid in children.stdout.split():
                try:
                    if os.readlink("/proc/%s/exe" % pid).endswith("/systemd"):
                        self.pid = int(pid)
                except OSError:
                    pass
            if self.pid is None:
                time.sleep(0.05)
        state = ""
        while time.monotonic() < deadline:
            # --wait returns once start-up is over: running, or degraded when some host unit failed.
            out = self.run("systemctl", "is-system-running", "--wait", check=False, timeout=max(1, deadline -
                                                                                                  time.monotonic()))
            state = out.stdout.strip()
            if state in ("running", "degraded"):
                return self
            time.sleep(0.2)
        raise ContainerError("the container did not finish booting (state %r):\n%s"
                             % (state, self.console.read_text()[-3000:]))

    def shutdown(self):
        if self.nspawn and self.nspawn.poll() is None:
            # Nothing in the container is kept: power off at once rather than stop each host service.
            subprocess.run(self.command("systemctl", "poweroff", "--force", "--force"), capture_output=True,
                           timeout=30, check=False)
            for ending in (signal.SIGTERM, signal.SIGKILL):
                try:
                    self.nspawn.wait(15)
                    break
                except subprocess.TimeoutExpired:
                    os.killpg(self.nspawn.pid, ending)
            self.nspawn.wait()
        if os.path.ismount(self.root):
            subprocess.run(["umount", str(self.root)], check=False)
        if os.path.ismount(self.root):
            subprocess.run(["umount", "-l", str(self.root)], check=False)
        shutil.rmtree(self.base, ignore_errors=True)

    # --- commands ---------------------------------------------------------------------------------

    def command(self, *argv, user=None):
        """The host's argv that runs `argv` inside the container, as root or as `user` (a name: its
        primary group and every group /etc/group gives it, as a login would)."""
        inner = [str(a) for a in argv]
        if user == "nobody":
            inner = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] + inner
        elif user:
            inner = ["setpriv", "--reuid=" + user, "--regid=" + user, "--init-groups"] + inner
        env = ["env", "-i", "PATH=" + PATH, "LANG=C.UTF-8", "TERM=dumb", "DEBIAN_FRONTEND=noninteractive"]
        env.append("HOME=" + ("/root" if not user else "/nonexistent" if user == "nobody" else "/home/" + user))
        return ["nsenter", "-t", str(self.pid), "-a"] + env + inner

    def run(self, *argv, user=None, check=True, timeout=60, input=None):
        out = Result(subprocess.run(self.command(*argv, user=user), capture_output=True, text=True,
                                    timeout=timeout, input=input))
        if check and out.returncode != 0:
            raise AssertionError("%s failed in the container: %r" % (" ".join(map(str, argv)), out))
        return out

    def popen(self, *argv, user=None):
        return subprocess.Popen(self.command(*argv, user=user), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)

    def sh(self, script, **kw):
        return self.run("sh", "-c", script, **kw)

    def stat(self, path):
        """(octal mode, owner, group, file type) of a path inside, or None when there is none; /run is
        the container's own tmpfs, out of the host's sight."""
        out = self.run("stat", "-c", "%a %U %G %F", path, check=False)
        if out.returncode != 0:
            return None
        mode, owner, group, kind = out.stdout.strip().split(" ", 3)
        return mode, owner, group, kind

    def exists(self, path):
        return self.stat(path) is not None

    def put(self, source, inside):
        """Copies a host file into the container (e.g. /var/tmp/x); returns the path inside."""
        target = self.root / str(inside).lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
        return str(inside)

    # --- systemd and the package ------------------------------------------------------------------

    def show(self, unit, *properties):
        out = self.run("systemctl", "show", unit, *("-p" + p for p in properties))
        return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)

    def active(self, *units):
        out = self.run("systemctl", "is-active", *units, check=False)
        return out.stdout.split()

    def wait_for(self, predicate, timeout, what, interval=0.1):
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError("timed out after %s s waiting for %s; placed's journal:\n%s"
                                     % (timeout, what, self.journal_text()))
            time.sleep(interval)

    def journal_text(self, *match, lines=60):
        return self.run("journalctl", "--no-pager", "-n", str(lines), "-u", "placed.service", "-u", "placed.socket",
                        *match, check=False).stdout

    def journal(self, *match, cursor=None):
        """Entries (dicts) of the container's journal matching every FIELD=value of `match`, after
        `cursor` when given. The matching is done here: systemd 252's journalctl finds nothing when
        matches and --after-cursor are combined."""
        args = ["journalctl", "--no-pager", "-o", "json"] + (["--after-cursor", cursor] if cursor else list(match))
        out = self.run(*args, check=False)
        wanted = [m.split("=", 1) for m in match]
        entries = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        return [e for e in entries if all(e.get(field) == value for field, value in wanted)]

    def cursor(self):
        out = self.run("journalctl", "--no-pager", "-n", "0", "--show-cursor", check=False)
        found = re.search(r"-- cursor: (\S+)", out.stdout)
        return found.group(1) if found else None

    def install(self, deb):
        """apt-get install of a .deb copied in; returns (Result, seconds)."""
        inside = self.put(deb, "/var/tmp/placed-debs/" + pathlib.Path(deb).name)
        started = time.monotonic()
        out = self.run("apt-get", "install", "-y", "--no-install-recommends", inside, check=False, timeout=300)
        return out, time.monotonic() - started
