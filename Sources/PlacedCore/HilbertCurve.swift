/// The Hilbert curve through a 65,536 × 65,536 grid: it visits every cell once, each next to the one
/// before, so cells near each other along it are near on the grid, without the jumps of a Z-order
/// (Morton) curve. Boxes packed in its order make the tight, barely overlapping nodes of a Hilbert
/// R-tree (Kamel and Faloutsos, "On Packing R-trees", 1993), whose leaves can be written as the boxes
/// come, where Sort-Tile-Recursive needs them all at once.
public enum HilbertCurve {
    /// How far along the curve cell (`x`, `y`) is: 0 at (0, 0), 2³² − 1 at (65,535, 0).
    public static func distance(x: UInt16, y: UInt16) -> UInt32 {
        // Quadrant by quadrant from the top bit: add the quadrants passed, then turn the rest of the
        // cell's coordinates into those of the curve's shape inside that quadrant.
        var x = UInt32(x)
        var y = UInt32(y)
        var distance: UInt32 = 0
        var side: UInt32 = 1 << 15
        while side > 0 {
            let right: UInt32 = x & side != 0 ? 1 : 0
            let up: UInt32 = y & side != 0 ? 1 : 0
            distance &+= side &* side &* ((3 &* right) ^ up)
            if up == 0 {
                if right == 1 {
                    x ^= 0xFFFF
                    y ^= 0xFFFF
                }
                swap(&x, &y)
            }
            side >>= 1
        }
        return distance
    }
}

/// Where boxes' centres fall on the Hilbert curve laid over the extent of all of them (16 bits a
/// coordinate): the map layer's row order, found in one pass over the boxes and used in another.
public struct HilbertOrder: Sendable {
    private var minimum: (latitude: Int64, longitude: Int64)?
    private var maximum: (latitude: Int64, longitude: Int64) = (0, 0)

    public init() {}

    /// Widens the extent to `box`'s centre.
    public mutating func include(_ box: PackedRTree.Box) {
        let centre = box.doubledCentre
        guard let low = minimum else {
            minimum = centre
            maximum = centre
            return
        }
        minimum = (min(low.latitude, centre.latitude), min(low.longitude, centre.longitude))
        maximum = (max(maximum.latitude, centre.latitude), max(maximum.longitude, centre.longitude))
    }

    /// `box`'s centre's distance along the curve, longitude as x and latitude as y (a box outside
    /// the extent is clamped to it).
    public func code(of box: PackedRTree.Box) -> UInt32 {
        guard let minimum else { return 0 }
        let centre = box.doubledCentre
        func cell(_ value: Int64, _ low: Int64, _ high: Int64) -> UInt16 {
            let span = Double(max(high - low, 1))
            return UInt16((Double(min(max(value, low), high) - low) / span * 65_535).rounded(.down))
        }
        return HilbertCurve.distance(
            x: cell(centre.longitude, minimum.longitude, maximum.longitude),
            y: cell(centre.latitude, minimum.latitude, maximum.latitude))
    }
}
