/// The string table of one PrimitiveBlock: spans into the block's bytes, plus each string's role
/// as a key (PlaceRules), computed once per block so elements are classified by table lookups.
struct StringTable {
    private var starts: [UnsafePointer<UInt8>] = []
    private var counts: [Int32] = []
    private(set) var roles: [UInt8] = []

    var count: Int { starts.count }

    subscript(index: UInt32) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: starts[Int(index)], count: Int(counts[Int(index)]))
    }

    /// Reads a StringTable message (`repeated bytes s = 1`), reusing this table's storage.
    mutating func load(_ message: ProtobufReader) throws(ProtobufError) {
        starts.removeAll(keepingCapacity: true)
        counts.removeAll(keepingCapacity: true)
        roles.removeAll(keepingCapacity: true)
        var message = message
        while let (field, wireType) = try message.nextField() {
            guard field == 1 else {
                try message.skipField(wireType)
                continue
            }
            try ProtobufReader.expect(wireType, .lengthDelimited, field: field)
            let string = try message.lengthDelimited()
            starts.append(string.position)
            counts.append(Int32(string.remaining))
            roles.append(PlaceRules.role(ofKey: string.bytes))
        }
    }
}

/// Decodes PrimitiveBlocks (osmformat.proto) into an ExtractCollector: every node's location and
/// way's refs, the tags the import reads, multipolygon relations' member ways, and element counts.
/// Reuses its buffers from block to block.
struct PrimitiveBlockDecoder {
    private var strings = StringTable()
    private var groups: [ProtobufReader] = []
    /// Which groups are decoded; the others are skipped unread.
    var decodesNodes = true
    var decodesWays = true
    var decodesRelations = true
    /// Whether elements' tags are read (and so the string table); the read for the multipolygons' member
    /// ways needs only ids and refs, and the first read has checked the tags of the same blocks.
    var decodesTags = true
    /// What the last block held, as `ElementKinds` bits.
    private(set) var kinds: UInt8 = 0

    enum ElementKinds {
        static let nodes: UInt8 = 1
        static let ways: UInt8 = 2
        static let relations: UInt8 = 4
    }

    mutating func decode(_ bytes: UnsafeRawBufferPointer, into collector: inout ExtractCollector)
        throws(ProtobufError)
    {
        var block = ProtobufReader(bytes)
        kinds = 0
        var stringTable: ProtobufReader?
        var scale = CoordinateScale()
        groups.removeAll(keepingCapacity: true)
        while let (field, wireType) = try block.nextField() {
            switch field {
            case 1:
                try ProtobufReader.expect(wireType, .lengthDelimited, field: field)
                stringTable = try block.lengthDelimited()
            case 2:
                try ProtobufReader.expect(wireType, .lengthDelimited, field: field)
                groups.append(try block.lengthDelimited())
            case 17:
                try ProtobufReader.expect(wireType, .varint, field: field)
                scale.granularity = try block.int64()
                guard scale.granularity > 0 else { throw ProtobufError("granularity \(scale.granularity)") }
            case 19:
                try ProtobufReader.expect(wireType, .varint, field: field)
                scale.latitudeOffset = try block.int64()
            case 20:
                try ProtobufReader.expect(wireType, .varint, field: field)
                scale.longitudeOffset = try block.int64()
            default:
                try block.skipField(wireType)
            }
        }
        guard let stringTable else { throw ProtobufError("PrimitiveBlock without a string table") }
        // A block of only skipped kinds needs no strings: peek at the groups' first field first.
        if !(decodesNodes && decodesWays && decodesRelations) {
            var wanted = false
            for group in groups {
                var peek = group
                guard let (field, _) = try peek.nextField() else { continue }
                kinds |= field <= 2 ? ElementKinds.nodes : field == 3 ? ElementKinds.ways : ElementKinds.relations
                if (field <= 2 && decodesNodes) || (field == 3 && decodesWays) || (field == 4 && decodesRelations) {
                    wanted = true
                }
            }
            if !wanted { return }
            kinds = 0
        }
        if decodesTags { try strings.load(stringTable) }
        for group in groups {
            try decodeGroup(group, scale: scale, into: &collector)
        }
    }

    private mutating func decodeGroup(
        _ group: ProtobufReader, scale: CoordinateScale, into collector: inout ExtractCollector
    )
        throws(ProtobufError)
    {
        var group = group
        while let (field, wireType) = try group.nextField() {
            switch field {
            case 1:
                try ProtobufReader.expect(wireType, .lengthDelimited, field: field)
                kinds |= ElementKinds.nodes
                let node = try group.lengthDelimited()
                if decodesNodes { try decodeNode(node, scale: scale, into: &collector) }
            case 2:
                try ProtobufReader.expect(wireType, .lengthDelimited, field: field)
                kinds |= ElementKinds.nodes
                let dense = try group.lengthDelimited()
                if decodesNodes { try decodeDenseNodes(dense, scale: scale, into: &collector) }
            case 3:
                try ProtobufReader.expect(wireType, .lengthDelimited, field: field)
                kinds |= ElementKinds.ways
                let way = try group.lengthDelimited()
                if decodesWays { try decodeWay(way, into: &collector) }
            case 4:
                try ProtobufReader.expect(wireType, .lengthDelimited, field: field)
                kinds |= ElementKinds.relations
                let relation = try group.lengthDelimited()
                if decodesRelations { try decodeRelation(relation, into: &collector) }
            default:
                try group.skipField(wireType)
            }
        }
    }

    /// DenseNodes: parallel packed arrays, ids and coordinates delta-coded, tags as
    /// `key value key value 0` per node in one array (empty when no node in the block has tags).
    private func decodeDenseNodes(
        _ message: ProtobufReader, scale: CoordinateScale, into collector: inout ExtractCollector
    )
        throws(ProtobufError)
    {
        var message = message
        var ids = ProtobufReader(UnsafeRawBufferPointer(start: nil, count: 0))
        var latitudes = ids
        var longitudes = ids
        var keysValues = ids
        while let (field, wireType) = try message.nextField() {
            switch field {
            case 1, 8, 9, 10:
                try ProtobufReader.expect(wireType, .lengthDelimited, field: field)
                let array = try message.lengthDelimited()
                switch field {
                case 1: ids = array
                case 8: latitudes = array
                case 9: longitudes = array
                default: keysValues = array
                }
            default:
                try message.skipField(wireType)
            }
        }
        let hasTags = !keysValues.isAtEnd
        let roles = strings.roles
        var id: Int64 = 0
        var latitude: Int64 = 0
        var longitude: Int64 = 0
        while !ids.isAtEnd {
            id &+= try ids.signedVarint()
            guard !latitudes.isAtEnd, !longitudes.isAtEnd else {
                throw ProtobufError("DenseNodes: fewer coordinates than ids")
            }
            latitude &+= try latitudes.signedVarint()
            longitude &+= try longitudes.signedVarint()
            let location = try scale.location(latitude, longitude, node: id)
            collector.nodes.append(id: id, location: location)
            guard hasTags else { continue }
            var tags = ElementTags()
            while true {
                let key = try keysValues.varint()
                if key == 0 { break }
                let value = try keysValues.varint()
                guard key < roles.count, value < roles.count else {
                    throw ProtobufError("DenseNodes: string index out of range")
                }
                let role = roles[Int(key)]
                if role != PlaceRules.ignored { tags.record(role: role, key: UInt32(key), value: UInt32(value)) }
            }
            if tags.mayBePlace(isWay: false) || tags.mayHaveAddress {
                collector.addNode(id: id, location: location, tags: tags, strings: strings)
            }
        }
        guard latitudes.isAtEnd, longitudes.isAtEnd, keysValues.isAtEnd else {
            throw ProtobufError("DenseNodes: arrays of different lengths")
        }
    }

    /// A plain Node (writers use DenseNodes, but the format allows both).
    private func decodeNode(
        _ message: ProtobufReader, scale: CoordinateScale, into collector: inout ExtractCollector
    )
        throws(ProtobufError)
    {
        var message = message
        var id: Int64?
        var latitude: Int64?
        var longitude: Int64?
        var keys = ProtobufReader(UnsafeRawBufferPointer(start: nil, count: 0))
        var values = keys
        while let (field, wireType) = try message.nextField() {
            switch field {
            case 1, 8, 9:
                try ProtobufReader.expect(wireType, .varint, field: field)
                let number = try message.signedVarint()
                if field == 1 {
                    id = number
                } else if field == 8 {
                    latitude = number
                } else {
                    longitude = number
                }
            case 2:
                try ProtobufReader.expect(wireType, .lengthDelimited, field: field)
                keys = try message.lengthDelimited()
            case 3:
                try ProtobufReader.expect(wireType, .lengthDelimited, field: field)
                values = try message.lengthDelimited()
            default:
                try message.skipField(wireType)
            }
        }
        guard let id, let latitude, let longitude else {
            throw ProtobufError("Node without id or coordinates")
        }
        let location = try scale.location(latitude, longitude, node: id)
        collector.nodes.append(id: id, location: location)
        let tags = try readTags(keys: keys, values: values)
        if tags.mayBePlace(isWay: false) || tags.mayHaveAddress {
            collector.addNode(id: id, location: location, tags: tags, strings: strings)
        }
    }

    /// Way: tags as parallel packed key and value indices, node refs as packed deltas.
    private func decodeWay(_ message: ProtobufReader, into collector: inout ExtractCollector)
        throws(ProtobufError)
    {
        var message = message
        var id: Int64?
        var keys = ProtobufReader(UnsafeRawBufferPointer(start: nil, count: 0))
        var values = keys
        var refs = keys
        while let (field, wireType) = try message.nextField() {
            switch field {
            case 1:
                try ProtobufReader.expect(wireType, .varint, field: field)
                id = try message.int64()
            case 2, 3, 8:
                try ProtobufReader.expect(wireType, .lengthDelimited, field: field)
                let array = try message.lengthDelimited()
                if field == 2 { keys = array } else if field == 3 { values = array } else { refs = array }
            default:
                try message.skipField(wireType)
            }
        }
        guard let id else { throw ProtobufError("Way without id") }
        let tags = decodesTags ? try readTags(keys: keys, values: values) : ElementTags()
        try collector.addWay(id: id, refs: refs, tags: tags, strings: strings)
    }

    /// Relation: tags as for a way; members as parallel packed arrays of roles, delta-coded ids and
    /// types (0 node, 1 way, 2 relation). Only the member ways of multipolygons are kept.
    private func decodeRelation(_ message: ProtobufReader, into collector: inout ExtractCollector)
        throws(ProtobufError)
    {
        var message = message
        var id: Int64?
        var keys = ProtobufReader(UnsafeRawBufferPointer(start: nil, count: 0))
        var values = keys
        var memberIDs = keys
        var memberTypes = keys
        while let (field, wireType) = try message.nextField() {
            switch field {
            case 1:
                try ProtobufReader.expect(wireType, .varint, field: field)
                id = try message.int64()
            case 2, 3, 9, 10:
                try ProtobufReader.expect(wireType, .lengthDelimited, field: field)
                let array = try message.lengthDelimited()
                switch field {
                case 2: keys = array
                case 3: values = array
                case 9: memberIDs = array
                default: memberTypes = array
                }
            default:
                try message.skipField(wireType)
            }
        }
        guard let id else { throw ProtobufError("Relation without id") }
        collector.relationCount += 1
        let tags = try readTags(keys: keys, values: values)
        guard tags.has(PlaceRules.type) else { return }
        var memberWays: [Int64] = []
        var member: Int64 = 0
        while !memberIDs.isAtEnd {
            member &+= try memberIDs.signedVarint()
            guard !memberTypes.isAtEnd else { throw ProtobufError("Relation: fewer member types than ids") }
            if try memberTypes.varint() == 1 { memberWays.append(member) }
        }
        guard memberTypes.isAtEnd else { throw ProtobufError("Relation: more member types than ids") }
        collector.addRelation(id: id, memberWays: memberWays, tags: tags, strings: strings)
    }

    private func readTags(keys: ProtobufReader, values: ProtobufReader) throws(ProtobufError)
        -> ElementTags
    {
        var keys = keys
        var values = values
        var tags = ElementTags()
        let roles = strings.roles
        while !keys.isAtEnd {
            let key = try keys.varint()
            guard !values.isAtEnd else { throw ProtobufError("fewer tag values than keys") }
            let value = try values.varint()
            guard key < roles.count, value < roles.count else {
                throw ProtobufError("string index out of range")
            }
            let role = roles[Int(key)]
            if role != PlaceRules.ignored { tags.record(role: role, key: UInt32(key), value: UInt32(value)) }
        }
        guard values.isAtEnd else { throw ProtobufError("more tag values than keys") }
        return tags
    }
}

/// PrimitiveBlock coordinates: nanodegrees = offset + granularity × stored value. Locations are kept
/// in OSM's own resolution, 1e-7 degree (osmium's too), which fits an Int32.
struct CoordinateScale {
    var granularity: Int64 = 100
    var latitudeOffset: Int64 = 0
    var longitudeOffset: Int64 = 0

    @inline(__always)
    func location(_ latitude: Int64, _ longitude: Int64, node: Int64) throws(ProtobufError)
        -> NodeLocation
    {
        let lat: Int64
        let lon: Int64
        if granularity == 100 && latitudeOffset == 0 && longitudeOffset == 0 {
            (lat, lon) = (latitude, longitude)
        } else {
            lat = Self.rounded(latitudeOffset &+ granularity &* latitude)
            lon = Self.rounded(longitudeOffset &+ granularity &* longitude)
        }
        guard lat.magnitude <= 900_000_000, lon.magnitude <= 1_800_000_000 else {
            throw ProtobufError("node \(node) has a location out of range")
        }
        return NodeLocation(latitude: Int32(lat), longitude: Int32(lon))
    }

    /// Nanodegrees to the nearest 1e-7 degree.
    private static func rounded(_ nano: Int64) -> Int64 {
        (nano >= 0 ? nano &+ 50 : nano &- 50) / 100
    }
}
