#!/usr/bin/env python3
"""The Debian package: its size, and the time from `apt install` to READY (placed.socket and
placed.service both active) on a booted Debian 12 (the system tests' container), first install and
reinstalls after a purge; the container's boot to multi-user for reference.

Usage: bench/package.py [DEB]   (default: scripts/build-deb builds one)
"""
import pathlib
import statistics
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "system"))
from container import Container  # noqa: E402

RUNS = 3


def install_to_ready(container, deb):
    """Seconds from starting apt-get install to both units active, and to apt's exit."""
    ready = {}
    started = time.monotonic()

    def watch():
        while "at" not in ready and time.monotonic() - started < 120:
            if container.active("placed.socket", "placed.service") == ["active", "active"]:
                ready["at"] = time.monotonic() - started
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    out, total = container.install(deb)
    watcher.join()
    if out.returncode != 0 or "at" not in ready:
        sys.exit("install failed or placed never became ready: %r" % out)
    return ready["at"], total


def main():
    if len(sys.argv) > 1:
        deb = pathlib.Path(sys.argv[1])
    else:
        deb = pathlib.Path(subprocess.run([str(ROOT / "scripts" / "build-deb")], capture_output=True, text=True,
                                          check=True).stdout.strip().splitlines()[-1])
    installed_kb = int(subprocess.run(["dpkg-deb", "-f", str(deb), "Installed-Size"], capture_output=True,
                                      text=True, check=True).stdout)
    print("package %s: %.2f MB (.deb), installed %.1f MB" % (deb.name, deb.stat().st_size / 1e6, installed_kb / 1024))
    container = Container("bench")
    try:
        booted = time.monotonic()
        container.boot()
        print("container boot to multi-user: %.1f s" % (time.monotonic() - booted))
        times = []
        for run in range(RUNS):
            ready, total = install_to_ready(container, deb)
            times.append(ready)
            print("install %d: READY after %.2f s, apt done after %.2f s" % (run + 1, ready, total))
            container.run("apt-get", "purge", "-y", "placed", timeout=300)
        print("apt install to READY: first %.2f s, median %.2f s of %d" % (times[0], statistics.median(times), RUNS))
    finally:
        container.shutdown()


if __name__ == "__main__":
    main()
