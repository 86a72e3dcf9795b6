#!/usr/bin/env python3
"""GetPlaces round trips per second over D-Bus (issue 6): placed on a private dbus-daemon with the
project's policy, called by 1 and by 100 concurrent clients (jeepney, asyncio, one connection each),
beside the bus's own org.freedesktop.DBus.GetId as the reference round trip through the same
dbus-daemon. Usage: bench/dbus.py [--seconds S]"""
import argparse
import asyncio
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from jeepney import DBusAddress, new_method_call
from jeepney.io.asyncio import open_dbus_router

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "integration"))
from harness import Placed, bin_path  # noqa: E402

PLACED = DBusAddress("/io/placed/Placed1", bus_name="io.placed.Placed1", interface="io.placed.Placed1")
BUS = DBusAddress("/org/freedesktop/DBus", bus_name="org.freedesktop.DBus", interface="org.freedesktop.DBus")


async def clients(address, count, seconds, message):
    routers = [await open_dbus_router(bus=address).__aenter__() for _ in range(count)]
    done = [0] * count
    deadline = time.monotonic() + seconds

    async def run(i):
        while time.monotonic() < deadline:
            reply = await routers[i].send_and_get_reply(message())
            assert reply.header.message_type.name == "method_return", reply
            done[i] += 1

    start = time.monotonic()
    await asyncio.gather(*(run(i) for i in range(count)))
    elapsed = time.monotonic() - start
    for r in routers:
        await r.__aexit__(None, None, None)
    return sum(done) / elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3)
    args = parser.parse_args()
    bin_dir = str(bin_path("release", ""))
    work = pathlib.Path(tempfile.mkdtemp(prefix="placed-dbus-bench-"))
    conf = work / "bus.conf"
    conf.write_text("""<busconfig><type>placed-bench</type><listen>unix:path=%s</listen><auth>EXTERNAL</auth>
<policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*"/><allow receive_sender="*"/></policy>
<include>%s</include></busconfig>""" % (work / "bus", ROOT / "etc/dbus-1/system.d/io.placed.Placed1.conf"))
    bus = subprocess.Popen(["dbus-daemon", "--nofork", "--print-address", "--config-file", str(conf)],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    address = bus.stdout.readline().strip()
    subprocess.run([bin_dir + "/placectl", "import", str(ROOT / "data/helsinki-center.osm.pbf"), "--db",
                    str(work / "places.db")], check=True, capture_output=True)
    placed = Placed(bin_dir + "/placed", "--bus", "session", "--static", "60.1699,24.9384,10", "--db",
                    work / "places.db", "--socket", work / "sock", env={"DBUS_SESSION_BUS_ADDRESS": address})
    try:
        placed.wait_for(r"ranking 1:")
        print("D-Bus round trips through a private dbus-daemon (jeepney asyncio clients, %.0f s each)" % args.seconds)
        for count in (1, 100):
            places = asyncio.run(clients(address, count, args.seconds,
                                         lambda: new_method_call(PLACED, "GetPlaces", "u", (5,))))
            reference = asyncio.run(clients(address, count, args.seconds,
                                            lambda: new_method_call(BUS, "GetId")))
            print("  %3d client%s  GetPlaces(5) %8.0f/s   dbus-daemon GetId %8.0f/s   ratio %.2f"
                  % (count, " " if count == 1 else "s", places, reference, places / reference))
    finally:
        placed.stop()
        bus.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
