import PlacedCore

/// A ranking's places as the mapped file holds them (`PlaceCatalog.rankListing`): for a caller that
/// writes them out (the varlink `Rank` reply), the text of each read in place (`text(at:)`) instead of
/// decoded into a `Place` with its Strings, names dictionary and outline. `rankedPlace(at:)` is the
/// place as `PlaceCatalog.rank` lists it, for what the text cannot give. Keeps its database (the mapping
/// and the kinds' bytes) alive while it lives; the text it gives is valid as long as the listing is.
public struct PlaceListing {
    private let database: PlaceDatabase
    private let places: [RankedCandidate<MappedCandidate>]

    init(database: PlaceDatabase, places: [RankedCandidate<MappedCandidate>]) {
        self.database = database
        self.places = places
    }

    public var count: Int { places.count }
    public func distance(at index: Int) -> Double { places[index].distance }
    public func likelihood(at index: Int) -> Double { places[index].likelihood }

    /// The place decoded, as `PlaceCatalog.rank` lists it.
    public func rankedPlace(at index: Int) -> RankedPlace {
        let ranked = places[index]
        return RankedPlace(place: ranked.candidate.place, distance: ranked.distance, likelihood: ranked.likelihood)
    }

    public var rankedPlaces: [RankedPlace] { places.indices.map(rankedPlace(at:)) }

    /// What `PlaceCatalog.rank` throws once the file was found truncated under placed
    /// (`PlaceDatabase.isDamaged`): text read since may be zeros.
    public var damage: PlaceDatabaseError? {
        database.isDamaged ? .corrupt(path: database.path, detail: PlaceDatabase.shrunk) : nil
    }

    /// Place `index`'s text as its record holds it; nil when only `rankedPlace(at:)` gives what decoding
    /// gives: the record does not decode (the decoded place is then a stand-in), a string is not valid
    /// UTF-8 (decoding repairs it), or the file is damaged.
    public func text(at index: Int) -> PlaceText? {
        let number = places[index].candidate.number
        guard !database.isDamaged else { return nil }
        guard let record = database.pack.record(number) else { return nil }
        // What `PlaceDatabase.decode` reads and checks, without building anything.
        var reader = RecordReader(record)
        guard let flags = reader.byte(), let sourceCode = reader.byte(), Int(sourceCode) < PlacePack.sourceCodes.count,
            let id = reader.span(), let name = reader.span()
        else { return nil }
        var address: UnsafeRawBufferPointer?
        if flags & PlacePack.RecordFlag.address != 0 {
            guard let span = reader.span() else { return nil }
            address = span
        }
        var names: UnsafeRawBufferPointer?
        if flags & PlacePack.RecordFlag.names != 0 {
            guard let span = reader.span() else { return nil }
            names = span
        }
        if flags & PlacePack.RecordFlag.area != 0 { guard reader.double() != nil else { return nil } }
        if flags & PlacePack.RecordFlag.bounds != 0 {
            for _ in 0..<4 { guard reader.double() != nil else { return nil } }
        }
        if flags & PlacePack.RecordFlag.outline != 0 {
            guard let count = reader.varint(), count <= (reader.bytes.count - reader.position) / 16 else { return nil }
        }
        guard UTF8Check.isValid(id), UTF8Check.isValid(name), address.map(UTF8Check.isValid) ?? true else {
            return nil
        }
        let candidate = places[index].candidate
        return PlaceText(
            id: id, name: name, address: address, addressSource: PlacePack.sourceCodes[Int(sourceCode)],
            kind: database.kindBytes(candidate.kindCode), coordinate: candidate.coordinate, names: names)
    }
}

/// A place's text, valid UTF-8: its strings in its mapped record (what `PlaceDatabase.decode` would make
/// Strings of), its kind as the database's kinds hold it.
public struct PlaceText {
    public let id: UnsafeRawBufferPointer
    /// The `name` tag.
    public let name: UnsafeRawBufferPointer
    public let address: UnsafeRawBufferPointer?
    public let addressSource: AddressSource
    /// The kind ("amenity=cafe"), from `PlaceDatabase.kindBytes`.
    public let kind: UnsafeRawBufferPointer
    public let coordinate: Coordinate
    /// The `names` blob (`LocalizedNamesCoding`), not yet checked.
    let names: UnsafeRawBufferPointer?

    /// `Place.name(forLanguage:)` read from the record: the `name:<language>` entry the reader's
    /// language picks, else the `name` tag. Nil when that cannot be told from the bytes alone: the blob
    /// is not valid UTF-8, or a key it compares is not ASCII (a String compares those by canonical
    /// equivalence: "\u{212A}" is "K"); the importer writes only ASCII keys.
    public func name(for language: NameLanguage) -> UnsafeRawBufferPointer? {
        guard let names, !language.keys.isEmpty, names.count > 0 else { return name }
        guard language.isASCII, UTF8Check.isValid(names) else { return nil }
        // `LocalizedNamesCoding.decode`: entries split at U+001E (empty ones dropped), each split at its
        // first U+001F into language and name, the last of a repeated language kept. (Both separators
        // are controls, which are grapheme clusters of their own, so bytes split as Characters do.)
        for key in language.keys {
            var found: UnsafeRawBufferPointer?
            var start = 0
            while start < names.count {
                var end = start
                while end < names.count, names[end] != 0x1E { end += 1 }
                if let separator = names[start..<end].firstIndex(of: 0x1F) {
                    let entryKey = UnsafeRawBufferPointer(rebasing: names[start..<separator])
                    guard entryKey.allSatisfy({ $0 < 0x80 }) else { return nil }
                    if entryKey.elementsEqual(key) {
                        found = UnsafeRawBufferPointer(rebasing: names[(separator + 1)..<end])
                    }
                }
                start = end + 1
            }
            if let found, found.count > 0 { return found }
        }
        return name
    }
}

extension AddressSource {
    /// The source's number in a places file: each of `allCases` one of 0 ..< `allCases.count`.
    public var fileCode: Int { PlacePack.sourceCode(of: self) }
}

/// The name keys a reader's language tries, most specific first (`LocalizedName.candidates`), as bytes
/// for `PlaceText.name(for:)`; none without a language.
public struct NameLanguage {
    let keys: [[UInt8]]
    let isASCII: Bool

    public init(_ language: String?) {
        keys = language.map { LocalizedName.candidates($0).map { Array($0.utf8) } } ?? []
        isASCII = keys.allSatisfy { $0.allSatisfy { $0 < 0x80 } }
    }
}

/// Whether bytes are valid UTF-8, which is when `String(decoding:as:)` keeps them as they are.
enum UTF8Check {
    static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        let count = bytes.count
        var tailChecked = count < 8
        while index < count {
            if count - index >= 8 {
                if bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 == 0 {
                    index += 8
                    continue
                }
            } else if !tailChecked {
                // The last eight bytes, overlapping those already checked, all ASCII: so is the tail.
                tailChecked = true
                if bytes.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self) & 0x8080_8080_8080_8080 == 0 {
                    return true
                }
            }
            let lead = bytes[index]
            if lead < 0x80 {
                index += 1
                continue
            }
            // The second byte's range narrows for the leads that would give overlong forms,
            // surrogates or code points beyond U+10FFFF (Unicode's table 3-7).
            let length: Int
            var low: UInt8 = 0x80
            var high: UInt8 = 0xBF
            switch lead {
            case 0xC2...0xDF: length = 2
            case 0xE0: (length, low) = (3, 0xA0)
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED: (length, high) = (3, 0x9F)
            case 0xF0: (length, low) = (4, 0x90)
            case 0xF1...0xF3: length = 4
            case 0xF4: (length, high) = (4, 0x8F)
            default: return false
            }
            guard count - index >= length, (low...high).contains(bytes[index + 1]) else { return false }
            for offset in 2..<length where !(0x80...0xBF).contains(bytes[index + offset]) { return false }
            index += length
        }
        return true
    }
}
