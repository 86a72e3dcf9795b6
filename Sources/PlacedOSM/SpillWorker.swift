import PlacedCore
import PlacedThreads

/// The disk-backed import's output filed on a thread of its own: the places the first read makes go to
/// the sink (the places file's writer encodes and spills each) and the addresses to the `AddressSpill`
/// (each written to the buckets of its tiles), in batches handed to an `OrderedWorker` while the reading
/// thread decodes the next blocks and makes the next ways. One worker keeps the order they were made in,
/// so the sink and the spill get what one thread doing both in turn would give them.
final class SpillWorker {
    enum Item {
        case place(Place)
        case address(AddressLender)
    }

    /// Items a job: the hand-over is a lock and a wake-up, small beside a thousand items' work.
    static let batchSize = 1_024

    private let sink: PlaceSink
    private let spill: AddressSpill
    private let worker = OrderedWorker(depth: 4)
    private var batch: [Item] = []

    init(sink: PlaceSink, spill: AddressSpill) {
        self.sink = sink
        self.spill = spill
        batch.reserveCapacity(Self.batchSize)
    }

    /// An import that failed drops its collector, and with it this: the thread ends then.
    deinit { worker.stop() }

    func add(_ item: consuming Item) {
        batch.append(item)
        if batch.count == Self.batchSize { flush() }
    }

    /// Returns once everything added is in the sink and the spill, and ends the thread: after this the
    /// caller may use them itself.
    func finish() {
        flush()
        worker.stop()
    }

    private func flush() {
        guard !batch.isEmpty else { return }
        let items = batch
        batch.removeAll(keepingCapacity: true)
        let sink = sink
        let spill = spill
        worker.submit {
            var book = spill  // the same spill: a class, passed as the book `add(to:)` files into
            for item in items {
                switch item {
                case .place(let place): sink.add(place)
                case .address(let lender): lender.add(to: &book)
                }
            }
        }
    }
}

/// What lends places an address: an address point, a building's outline, a named street's lines. One of
/// three books files it (`ExtractCollector.file`): the spill worker's thread, the disk-backed book, or the
/// book in memory.
enum AddressLender {
    case point(Coordinate, address: String)
    case building(polygons: [[[Coordinate]]], address: String)
    case street(name: String, lines: [[Coordinate]])

    func add<Book: AddressFiling>(to book: inout Book) {
        switch self {
        case .point(let coordinate, let address): book.addPoint(coordinate, address: address)
        case .building(let polygons, let address): book.addBuilding(polygons: polygons, address: address)
        case .street(let name, let lines): book.addStreet(name: name, lines: lines)
        }
    }
}

/// A book of what lends addresses: `AddressBook` in memory, `AddressSpill` on disk by tile.
protocol AddressFiling {
    mutating func addPoint(_ coordinate: Coordinate, address: String)
    mutating func addBuilding(polygons: [[[Coordinate]]], address: String)
    mutating func addStreet(name: String, lines: [[Coordinate]])
}

extension AddressBook: AddressFiling {}
extension AddressSpill: AddressFiling {}
