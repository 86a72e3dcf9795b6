/// Every way's node refs, as the file stores them (packed zigzag deltas, about 2–3 bytes a ref), so
/// that the multipolygon relations at the end of the file find their member ways without a second
/// read. Ids are sorted as PBF files are; an unsorted file is indexed once in `finish()`.
struct WayStore {
    private var ids: [Int64] = []
    /// `starts[i]..<starts[i + 1]`: way i's bytes in `bytes`.
    private var starts: [Int] = [0]
    private var bytes: [UInt8] = []
    private var isSorted = true
    /// When the file was not sorted: way numbers in id order.
    private var byID: [Int32] = []

    var count: Int { ids.count }

    /// Keeps a way's refs and returns its number, first and last ref and ref count; throws when the
    /// packed refs do not decode.
    mutating func append(id: Int64, refs: ProtobufReader) throws(ProtobufError)
        -> (number: Int, first: Int64, last: Int64, count: Int)
    {
        var reader = refs
        var ref: Int64 = 0
        var first: Int64 = 0
        var count = 0
        while !reader.isAtEnd {
            ref &+= try reader.signedVarint()
            if count == 0 { first = ref }
            count += 1
        }
        if let last = ids.last, id <= last { isSorted = false }
        ids.append(id)
        bytes.append(contentsOf: refs.bytes)
        starts.append(bytes.count)
        return (ids.count - 1, first, ref, count)
    }

    /// Packed refs decoded into `decoded` (emptied first, its storage kept).
    static func decode(_ refs: ProtobufReader, into decoded: inout [Int64]) throws(ProtobufError) {
        decoded.removeAll(keepingCapacity: true)
        var reader = refs
        var ref: Int64 = 0
        while !reader.isAtEnd {
            ref &+= try reader.signedVarint()
            decoded.append(ref)
        }
    }

    mutating func finish() {
        guard !isSorted else { return }
        byID = ids.indices.sorted { ids[$0] < ids[$1] }.map { Int32($0) }
    }

    /// The number of way `id`, nil when the file lacks it.
    func number(of id: Int64) -> Int? {
        var low = 0
        var high = ids.count
        func idAt(_ position: Int) -> Int64 { isSorted ? ids[position] : ids[Int(byID[position])] }
        while low < high {
            let middle = (low + high) / 2
            if idAt(middle) < id { low = middle + 1 } else { high = middle }
        }
        guard low < ids.count, idAt(low) == id else { return nil }
        return isSorted ? low : Int(byID[low])
    }

    func id(of number: Int) -> Int64 { ids[number] }

    /// Way `number`'s node refs (they decoded once in `append`).
    func refs(of number: Int) -> [Int64] {
        bytes.withUnsafeBytes { raw in
            var reader = ProtobufReader(UnsafeRawBufferPointer(rebasing: raw[starts[number]..<starts[number + 1]]))
            var refs: [Int64] = []
            var ref: Int64 = 0
            while !reader.isAtEnd, let delta = try? reader.signedVarint() {
                ref &+= delta
                refs.append(ref)
            }
            return refs
        }
    }
}
