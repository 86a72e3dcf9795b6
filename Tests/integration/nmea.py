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
    """The distance filter of DESIGN.md: first fix, then each fix >= threshold from the last move."""
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
