extension UnsafeBufferPointer where Element: Comparable {
    /// The first position whose element is not below `value`, `count` when there is none: a binary
    /// search of a buffer sorted in ascending order.
    func firstIndex(notBelow value: Element) -> Int {
        var lower = 0
        var upper = count
        while lower < upper {
            let middle = (lower + upper) / 2
            if self[middle] < value { lower = middle + 1 } else { upper = middle }
        }
        return lower
    }
}
