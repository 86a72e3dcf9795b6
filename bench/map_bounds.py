#!/usr/bin/env python3
"""The map layer's R*Tree (map_bounds) in two or more places files, side by side: the leaves' total
area (how tightly the tree is packed) and the cost of the same random 500 m boxes searched in each,
three rounds in turns. Used to compare a file's packing with another build's on the same extract.

usage: bench/map_bounds.py A.db B.db [...]
"""
import random
import sqlite3
import struct
import sys
import time


def leaves(db):
    """Leaves and their total area, in (1e-7 degree)^2, from the nodes' blobs (rtree.c's layout)."""
    area = 0
    numbers = [row[0] for row in db.execute("SELECT DISTINCT nodeno FROM map_bounds_rowid")]
    for number in numbers:
        blob = db.execute("SELECT data FROM map_bounds_node WHERE nodeno = ?", (number,)).fetchone()[0]
        count = struct.unpack(">H", blob[2:4])[0]
        cells = [struct.unpack(">q4i", blob[4 + 24 * i:28 + 24 * i]) for i in range(count)]
        area += (max(c[2] for c in cells) - min(c[1] for c in cells)) * (max(c[4] for c in cells) - min(c[3] for c in cells))
    return len(numbers), area


def main(paths):
    dbs = [sqlite3.connect("file:%s?mode=ro" % path, uri=True) for path in paths]
    for path, db in zip(paths, dbs):
        count, area = leaves(db)
        print("%s: %d leaves, leaves' area %.3g (1e-7 degree)^2" % (path, count, area))
    low_lat, high_lat, low_lon, high_lon = dbs[0].execute(
        "SELECT min(min_lat), max(max_lat), min(min_lon), max(max_lon) FROM map_bounds").fetchone()
    rnd = random.Random(7)
    boxes = []
    for _ in range(3000):
        lat, lon = rnd.randint(low_lat, high_lat), rnd.randint(low_lon, high_lon)
        boxes.append((lat - 22500, lat + 22500, lon - 45000, lon + 45000))  # about 500 m a side at 60° N
    query = "SELECT count(*) FROM map_bounds WHERE max_lat >= ? AND min_lat <= ? AND max_lon >= ? AND min_lon <= ?"
    for round_ in range(3):
        for path, db in zip(paths, dbs):
            start = time.perf_counter()
            found = sum(db.execute(query, box).fetchone()[0] for box in boxes)
            took = time.perf_counter() - start
            print("round %d %s: %.1f us a search, %.1f boxes found a search"
                  % (round_, path, took / len(boxes) * 1e6, found / len(boxes)))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1:])
