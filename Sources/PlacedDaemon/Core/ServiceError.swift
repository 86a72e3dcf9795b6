import PlacedCore
import PlacedStore

/// Every way a client request can fail, named the same on both interfaces
/// (`io.placed.Places.<Name>` on varlink, `io.placed.Placed1.Error.<Name>` on D-Bus).
public enum ServiceError: Error, Equatable, CustomStringConvertible {
    case unknownPlace(id: String)
    case notInRanking(id: String)
    case invalidLimit(Int, maximum: Int)
    case invalidPosition(latitude: Double, longitude: Double)
    case invalidAccuracy(latitude: Double, longitude: Double, accuracy: Double)
    /// `operation` needs what `requirement` says: `root or membership of group placed`.
    case permissionDenied(operation: String, requirement: String)
    case storeFailed(reason: String)
    case noPlaces
    /// A map radius that is not a number of metres from 0 to `maximum`.
    case invalidRadius(radius: Double, maximum: Double)
    /// More map features than one reply carries: a smaller radius has fewer.
    case tooManyFeatures(maximum: Int)
    /// The places file was imported without its map layer (`placectl import --no-map`).
    case noMapLayer
    /// A field mask naming a field places do not have (`FieldMask`); "" for an empty mask.
    case invalidField(String)
    /// A time that is not an RFC 3339 instant with a zone, within `RFC3339.years`.
    case invalidTime(String)

    public var name: String {
        switch self {
        case .unknownPlace: "UnknownPlace"
        case .notInRanking: "NotInRanking"
        case .invalidLimit: "InvalidLimit"
        case .invalidPosition, .invalidAccuracy: "InvalidPosition"
        case .permissionDenied: "PermissionDenied"
        case .storeFailed: "StoreFailed"
        case .noPlaces: "NoPlaces"
        case .invalidRadius: "InvalidRadius"
        case .tooManyFeatures: "TooManyFeatures"
        case .noMapLayer: "NoMapLayer"
        case .invalidField: "InvalidField"
        case .invalidTime: "InvalidTime"
        }
    }

    public var description: String {
        switch self {
        case let .unknownPlace(id): "no place has the id '\(id)'"
        case let .notInRanking(id): "place '\(id)' is not in the current ranking or the last few"
        case let .invalidLimit(n, maximum): "invalid limit \(n): ask for 1 to \(maximum)"
        case let .invalidPosition(lat, lon):
            "invalid position \(lat),\(lon): latitude within ±90, longitude within ±180"
        case let .invalidAccuracy(_, _, a): "invalid accuracy \(a): a number of metres >= 0"
        case let .permissionDenied(operation, requirement): "\(operation) needs \(requirement)"
        case let .storeFailed(reason): reason
        case .noPlaces: "no places are loaded; import some with placectl import"
        case let .invalidRadius(radius, maximum):
            "invalid radius \(radius): a number of metres from 0 to \(Int(maximum))"
        case let .tooManyFeatures(maximum):
            "more than \(maximum) map features there: ask for a smaller radius"
        case .noMapLayer: "the places file has no map layer: import it again without --no-map"
        case .invalidField(""): "no fields asked for: name at least one, or * for all"
        case let .invalidField(field): "no place field is named '\(field)'"
        case let .invalidTime(time):
            "invalid time '\(time)': an RFC 3339 instant with a zone, such as 2026-12-06T18:30:00+02:00, "
                + "in the years \(RFC3339.years.lowerBound) to \(RFC3339.years.upperBound)"
        }
    }

    /// The one check of a list length a client asks for: nil is `default`, anything outside
    /// 1...`maximum` is `invalidLimit`, because a client asking for 0 or 1000 has a bug worth seeing.
    static func checkLimit(_ limit: Int?, default: Int, maximum: Int) throws(ServiceError) -> Int {
        let limit = limit ?? `default`
        guard (1...maximum).contains(limit) else { throw .invalidLimit(limit, maximum: maximum) }
        return limit
    }

    /// The instant a client's `time` names (nil: `now`, wall-clock seconds).
    static func checkTime(_ text: String?, now: Double) throws(ServiceError) -> Int {
        guard let text else { return Int(now.rounded(.down)) }
        guard let seconds = RFC3339.parse(text) else { throw .invalidTime(String(text.prefix(64))) }
        return seconds
    }

    init(_ error: SelectionError) {
        switch error {
        case let .unknownPlace(id): self = .unknownPlace(id: id)
        case let .notInRanking(id): self = .notInRanking(id: id)
        }
    }

    /// A ranking at `coordinate` refused.
    init(_ error: RankingError, at coordinate: Coordinate) {
        let (latitude, longitude) = (coordinate.latitude, coordinate.longitude)
        switch error {
        case let .invalidLimit(n): self = .invalidLimit(n, maximum: Ranker.maximumLimit)
        case let .invalidFix(lat, lon): self = .invalidPosition(latitude: lat, longitude: lon)
        case let .invalidAccuracy(a): self = .invalidAccuracy(latitude: latitude, longitude: longitude, accuracy: a)
        case .invalidSpeed, .invalidModel: self = .invalidPosition(latitude: latitude, longitude: longitude)
        }
    }
}
