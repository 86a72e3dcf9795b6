"""An independent reading of NMEA logs: which fixes a gpsd client should see, and which of them
are moves under a distance filter. Shares no code with placed (geodesics from GeographicLib)."""
from geographiclib.geodesic import Geodesic

WGS84 = Geodesic.WGS84


def _degrees(value, hemisphere):
    if not value:
        return None
    dot = value.index(".")
    degrees = float(value[:dot - 2]) + float(value[dot - 2:]) / 60
    return -degrees if hemisphere in ("S", "W") else degrees


def fixes(path):
    """(time, lat, lon) of each epoch with a valid position, in order; one per epoch time.

    An epoch is the run of sentences sharing a time. Its position is valid when its GGA reports a
    fix from at least 3 satellites (a 2D fix needs 3); an epoch without GGA is valid when its RMC or
    GLL status is A."""
    epochs = []  # [time, {kind: (valid, lat, lon)}]
    for raw in open(path, encoding="ascii", errors="replace"):
        line = raw.strip()
        if not line.startswith("$") or "*" not in line:
            continue
        fields = line[1:line.index("*")].split(",")
        kind = fields[0][2:]
        if kind == "RMC" and len(fields) > 6:
            time, valid, lat, lon = fields[1], fields[2] == "A", (fields[3], fields[4]), (fields[5], fields[6])
        elif kind == "GGA" and len(fields) > 7:
            used = int(fields[7]) if fields[7] else 3
            time, valid, lat, lon = fields[1], fields[6] not in ("", "0") and used >= 3, \
                (fields[2], fields[3]), (fields[4], fields[5])
        elif kind == "GLL" and len(fields) > 6:
            time, valid, lat, lon = fields[5], fields[6] == "A", (fields[1], fields[2]), (fields[3], fields[4])
        else:
            continue
        if not time:
            continue
        if not epochs or epochs[-1][0] != time:
            epochs.append((time, {}))
        epochs[-1][1][kind] = (valid, _degrees(*lat), _degrees(*lon))
    out = []
    for time, sentences in epochs:
        valid, lat, lon = sentences.get("GGA") or sentences.get("RMC") or sentences["GLL"]
        if valid and lat is not None and lon is not None:
            out.append((time, lat, lon))
    return out


def moves(points, threshold=50.0):
    """docs/DESIGN.md, "Distance filter": first fix, then each fix >= threshold from the last move."""
    out = []
    for time, lat, lon in points:
        if not out or WGS84.Inverse(out[-1][1], out[-1][2], lat, lon)["s12"] >= threshold:
            out.append((time, lat, lon))
    return out


def with_preamble(source, target, epochs=40):
    """A copy of an NMEA log that starts with `epochs` no-fix RMC sentences, so gpsd has synced
    before the first real fix (gpsd swallows the first sentences of a gpsfake replay)."""
    lines = open(source, "rb").readlines()
    comments = [l for l in lines if l.startswith(b"#")]
    body = [l for l in lines if not l.startswith(b"#")]
    with open(target, "wb") as f:
        f.writelines(comments)
        f.writelines([b"$GPRMC,,V,,,,,,,,,,N*53\r\n"] * epochs)
        f.writelines(body)
    return target


def _nmea(body):
    checksum = 0
    for byte in body.encode("ascii"):
        checksum ^= byte
    return "$%s*%02X\r\n" % (body, checksum)


def _coordinate(value, positive, negative, width):
    hemisphere = positive if value >= 0 else negative
    value = abs(value)
    degrees = int(value)
    return "%0*d%07.4f" % (width, degrees, (value - degrees) * 60), hemisphere


def stop_and_go(target, start, legs, seed=7):
    """An NMEA log (RMC and GGA at 1 Hz, 40 no-fix epochs first) from `start` (lat, lon) along
    `legs`: ("stop", epochs) stays with metres of jitter, ("go", epochs, bearing, speed m/s) drives.
    Returns the (lat, lon) where each leg ended, for the test to know where the stops were."""
    import random
    rng = random.Random(seed)
    lat, lon = start
    second = 0
    ends = []
    with open(target, "w") as f:
        f.write("$GPRMC,,V,,,,,,,,,,N*53\r\n" * 40)
        for leg in legs:
            for _ in range(leg[1]):
                if leg[0] == "go":
                    moved = WGS84.Direct(lat, lon, leg[2], leg[3])
                    lat, lon, speed, track = moved["lat2"], moved["lon2"], leg[3], leg[2]
                    shown = (lat, lon)
                else:
                    jitter = WGS84.Direct(lat, lon, rng.uniform(0, 360), rng.uniform(0, 2))
                    shown, speed, track = (jitter["lat2"], jitter["lon2"]), 0.0, 0.0
                hours, rest = divmod(36000 + second, 3600)
                stamp = "%02d%02d%02d.00" % (hours % 24, rest // 60, rest % 60)
                la, ns = _coordinate(shown[0], "N", "S", 2)
                lo, ew = _coordinate(shown[1], "E", "W", 3)
                f.write(_nmea("GPRMC,%s,A,%s,%s,%s,%s,%.1f,%.1f,011226,,,A" % (stamp, la, ns, lo, ew,
                                                                             speed / 0.514444, track)))
                f.write(_nmea("GPGGA,%s,%s,%s,%s,%s,1,08,0.9,20.0,M,17.0,M,," % (stamp, la, ns, lo, ew)))
                second += 1
            ends.append((lat, lon))
    return ends
