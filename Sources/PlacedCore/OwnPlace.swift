/// A place an operator or a user defines (docs/DESIGN.md, "Own places"): a depot, a customer site, a
/// kiosk's gate. Ranked beside OpenStreetMap's places, kept beside the selection log, untouched by
/// imports.
public struct OwnPlace: Sendable, Equatable {
    /// `own:<key>`, the key chosen by the place's creator: stable across edits.
    public var id: String
    public var name: String
    /// `name:<language>` variants: language (lower case) → name.
    public var localizedNames: [String: String]
    /// What the place is: free text ("depot") or an OSM-style `key=value`, whose prior then sets the
    /// default weight.
    public var kind: String
    public var address: String?
    /// How strongly the place is preferred (the ranker's prior weight); nil: `defaultWeight`.
    public var weight: Double?
    public var geometry: OwnGeometry
    /// Opening hours, contact, access and services: the keys of OpenStreetMap's details, served and
    /// evaluated (`open_now`, `ClosedWeight=`) as an OSM place's are.
    public var details: PlaceDetails

    public init(
        id: String, name: String, kind: String = OwnPlace.defaultKind, address: String? = nil,
        localizedNames: [String: String] = [:], weight: Double? = nil, geometry: OwnGeometry,
        details: PlaceDetails = PlaceDetails()
    ) {
        self.id = id
        self.name = name
        self.localizedNames = localizedNames
        self.kind = kind
        self.address = address
        self.weight = weight
        self.geometry = geometry
        self.details = details
    }

    public static let idPrefix = "own:"
    public static let defaultKind = "own"
    public static let maximumKeyLength = 64
    public static let minimumRadius = 1.0
    public static let maximumRadius = 10_000.0
    /// Positions of all rings of a place together, closing ones included.
    public static let maximumVertices = 10_000
    /// An own place's default weight is this times the prior of an OSM place of its kind (an unknown
    /// kind: an ordinary place, 1): at the same spot and size it takes 5/4 of the OSM place's share.
    public static let defaultWeightFactor = 1.25

    /// The ranker's prior weight under `model`.
    public func effectiveWeight(in model: RankingModel) -> Double {
        weight ?? Self.defaultWeightFactor * model.prior(ofKind: kind).weight
    }

    /// The key of `id`, or nil when `id` is not `own:<key>` with a key of 1–64 of `A-Z a-z 0-9 . _ -`.
    public static func key(ofID id: String) -> Substring? {
        guard id.hasPrefix(idPrefix) else { return nil }
        let key = id.dropFirst(idPrefix.count)
        guard isValidKey(key) else { return nil }
        return key
    }

    public static func isValidKey(_ key: some StringProtocol) -> Bool {
        let bytes = key.utf8
        guard !bytes.isEmpty, bytes.count <= maximumKeyLength else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                true
            default: false
            }
        }
    }

    /// The first problem of the place, or nil.
    public func problem() -> OwnPlaceError.Reason? {
        guard Self.key(ofID: id) != nil else { return .badID(id) }
        if let reason = Self.nameProblem(name, language: nil) { return reason }
        for (language, variant) in localizedNames.sorted(by: { $0.key < $1.key }) {
            if language.isEmpty { return .emptyName(language: "") }
            if let reason = Self.nameProblem(variant, language: language) { return reason }
        }
        if let weight, !(weight.isFinite && weight > 0) { return .invalidWeight(weight) }
        if let reason = detailsProblem() { return reason }
        return geometry.problem()
    }

    /// A detail value too long to keep, or opening hours that do not parse: an OSM place's are kept
    /// whole or dropped at import, but an own place's creator can be told and fix them.
    func detailsProblem() -> OwnPlaceError.Reason? {
        for (key, value) in details.tags.sorted(by: { $0.key < $1.key }) {
            if value.utf8.count > PlaceDetails.maximumValueLength {
                return .detailTooLong(key: key, bytes: value.utf8.count)
            }
        }
        if let hours = details.openingHours {
            do throws(OpeningHoursError) {
                _ = try OpeningHours(parsing: hours)
            } catch {
                return .invalidOpeningHours(error.description)
            }
        }
        return nil
    }

    static func nameProblem(_ name: String, language: String?) -> OwnPlaceError.Reason? {
        if name.allSatisfy(\.isWhitespace) { return .emptyName(language: language) }
        // A name decoded from bytes that were not UTF-8 carries the replacement character.
        if name.unicodeScalars.contains("\u{FFFD}") { return .nameNotUTF8(language: language) }
        return nil
    }

    /// Checks a batch as a whole: the first problem of any place (naming it), or the same id twice.
    public static func validate(_ batch: [OwnPlace]) throws(OwnPlaceError) {
        var seen: [String: Int] = [:]
        for (index, place) in batch.enumerated() {
            if let reason = place.problem() { throw OwnPlaceError(feature: index, id: place.id, reason) }
            if let first = seen.updateValue(index, forKey: place.id) {
                throw OwnPlaceError(feature: index, id: place.id, .duplicateID(firstFeature: first))
            }
        }
    }

    /// The place as a ranking lists it. Its point is inside the shape: the centre of a circle, a
    /// point inside a polygon.
    public func place(in model: RankingModel = .standard) -> Place {
        Place(
            id: id, name: name, kind: kind, address: address, coordinate: geometry.interiorPoint,
            area: geometry.area, bounds: geometry.boundingBox, outline: geometry.outline,
            addressSource: address == nil ? AddressSource.none : .own, localizedNames: localizedNames,
            details: details)
    }
}

/// Why an own place, or a batch of them, was refused: the feature (its number in the batch, from 0,
/// and its id when it has one) and the reason. Nothing of the batch is applied.
public struct OwnPlaceError: Error, Equatable, CustomStringConvertible {
    public enum Reason: Sendable, Equatable {
        case badID(String)
        case duplicateID(firstFeature: Int)
        /// `language` nil: the `name`; else the `name:<language>` variant.
        case emptyName(language: String?)
        case nameNotUTF8(language: String?)
        case invalidWeight(Double)
        /// A detail value (`opening_hours`, `phone`…) longer than `PlaceDetails.maximumValueLength`.
        case detailTooLong(key: String, bytes: Int)
        /// `opening_hours` that does not parse: where and what was expected.
        case invalidOpeningHours(String)
        case radiusOutOfRange(Double)
        case invalidCoordinate(latitude: Double, longitude: Double)
        case ringTooShort(polygon: Int, ring: Int)
        case ringNotClosed(polygon: Int, ring: Int)
        case ringCrossesItself(polygon: Int, ring: Int)
        case tooManyVertices(Int)
        case noPolygon
        /// Anything of the GeoJSON that is not what an own place is written as.
        case invalidGeoJSON(String)
        /// A place id that is not stored, for a delete.
        case unknownID(String)
    }

    /// Number of the feature in the batch, from 0; nil for the batch as a whole.
    public var feature: Int?
    public var id: String?
    public var reason: Reason

    public init(feature: Int?, id: String?, _ reason: Reason) {
        self.feature = feature
        self.id = id
        self.reason = reason
    }

    public var description: String {
        var subject = ""
        if let feature { subject = "feature \(feature)" }
        if let id, !id.isEmpty { subject += subject.isEmpty ? id : " (\(id))" }
        return subject.isEmpty ? reasonText : "\(subject): \(reasonText)"
    }

    var reasonText: String {
        func named(_ language: String?) -> String { language.map { "name:\($0)" } ?? "name" }
        switch reason {
        case .badID(let id):
            return "invalid id \"\(id)\": must be own:<key>, the key 1 to 64 of A-Z a-z 0-9 . _ -"
        case .duplicateID(let first): return "the same id as feature \(first)"
        case .emptyName(let language): return "\(named(language)) is empty"
        case .nameNotUTF8(let language): return "\(named(language)) is not valid UTF-8"
        case .invalidWeight(let weight): return "invalid weight \(weight): must be a finite number > 0"
        case let .detailTooLong(key, bytes):
            return "\(key) is \(bytes) bytes, more than the \(PlaceDetails.maximumValueLength) a detail may have"
        case .invalidOpeningHours(let why): return "opening_hours does not parse: \(why)"
        case .radiusOutOfRange(let radius):
            return "radius \(radius) m out of range: \(Int(OwnPlace.minimumRadius)) to \(Int(OwnPlace.maximumRadius)) m"
        case .invalidCoordinate(let latitude, let longitude):
            return "invalid position \(latitude),\(longitude)"
        case .ringTooShort(let polygon, let ring): return "polygon \(polygon) ring \(ring) has fewer than 4 positions"
        case .ringNotClosed(let polygon, let ring):
            return "polygon \(polygon) ring \(ring) is not closed (its last position must repeat its first)"
        case .ringCrossesItself(let polygon, let ring): return "polygon \(polygon) ring \(ring) crosses itself"
        case .tooManyVertices(let count):
            return "\(count) vertices, more than the \(OwnPlace.maximumVertices) an own place may have"
        case .noPolygon: return "a multipolygon without polygons"
        case .invalidGeoJSON(let what): return "invalid GeoJSON: \(what)"
        case .unknownID(let id): return "no own place \(id)"
        }
    }
}
