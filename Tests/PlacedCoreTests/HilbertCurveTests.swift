import PlacedCore
import Testing

/// The Hilbert curve and the order of boxes' centres along it (the map layer's rows and tree).
@Suite struct HilbertCurveTests {
    /// The curve's first 4ᵏ cells are the 2ᵏ × 2ᵏ square at its start, each cell once and each next to
    /// the one before (a Z-order fails this at its second step); it ends at the grid's far corner.
    @Test func theHilbertCurveVisitsEachCellNextToTheOneBefore() {
        let side = 64
        var cellAt = [(x: Int, y: Int)?](repeating: nil, count: side * side)
        for x in 0..<side {
            for y in 0..<side {
                let distance = Int(HilbertCurve.distance(x: UInt16(x), y: UInt16(y)))
                #expect(distance < cellAt.count && cellAt[distance] == nil)
                if distance < cellAt.count { cellAt[distance] = (x, y) }
            }
        }
        let cells = cellAt.compactMap { $0 }
        #expect(cells.count == side * side)
        for (before, cell) in zip(cells, cells.dropFirst()) {
            #expect(abs(cell.x - before.x) + abs(cell.y - before.y) == 1, "\(before) → \(cell)")
        }
        #expect(HilbertCurve.distance(x: 0, y: 0) == 0)
        #expect(HilbertCurve.distance(x: 65_535, y: 0) == UInt32.max)
    }

    /// The order's extent is that of the centres included: its corners are the grid's; a box outside
    /// it is clamped; one box alone, or none, is at 0.
    @Test func theHilbertOrderSpansTheCentresIncluded() {
        func box(_ latitude: Int32, _ longitude: Int32) -> PackedRTree.Box {
            PackedRTree.Box(
                minLatitude: latitude, maxLatitude: latitude, minLongitude: longitude, maxLongitude: longitude)
        }
        var order = HilbertOrder()
        #expect(order.code(of: box(5, 5)) == 0)
        order.include(box(600_000_000, 240_000_000))
        #expect(order.code(of: box(600_000_000, 240_000_000)) == 0)
        order.include(box(610_000_000, 250_000_000))
        #expect(order.code(of: box(600_000_000, 250_000_000)) == UInt32.max, "south-east: the curve's end")
        #expect(order.code(of: box(610_000_000, 240_000_000)) == HilbertCurve.distance(x: 0, y: 65_535))
        #expect(order.code(of: box(0, 300_000_000)) == UInt32.max, "clamped")
        // A box's centre, not its corner: this one reaches the north-west corner but is centred south.
        let tall = PackedRTree.Box(
            minLatitude: 600_000_000, maxLatitude: 610_000_000, minLongitude: 240_000_000, maxLongitude: 240_000_000)
        #expect(order.code(of: tall) == HilbertCurve.distance(x: 0, y: 32_767))
    }
}
