extension Array {
    /// Keeps the first of each run of neighbours that `isDuplicate` calls the same: in a sorted
    /// array, every element once. In place, in order.
    @inlinable
    public mutating func removeAdjacentDuplicates(by isDuplicate: (Element, Element) -> Bool) {
        var kept = 0
        for position in indices where kept == 0 || !isDuplicate(self[kept - 1], self[position]) {
            self.swapAt(kept, position)
            kept += 1
        }
        removeSubrange(kept...)
    }
}
