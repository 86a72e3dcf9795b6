import PlacedCore
import PlacedJSON
import PlacedSystem
import PlacedWire

#if canImport(Glibc)
    import Glibc
#endif

/// What `placectl own` reads, writes and prints: GeoJSON files of own places, and their listing.
public enum OwnPlacesFile {
    /// The places of a GeoJSON file, checked as placed checks them: the first error names its feature,
    /// so a bad file is refused before anything is sent.
    public static func read(_ path: String) throws -> [OwnPlace] {
        let bytes = try readBytes(path)
        do {
            return try OwnPlace.readCollection(bytes)
        } catch {
            throw OwnPlacesFileError(path: path, error: error)
        }
    }

    static func readBytes(_ path: String) throws(SystemError) -> [UInt8] {
        let fd = try checkPOSIX(open(path, O_RDONLY | O_CLOEXEC), "cannot open \(path)")
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = try retryingOnInterrupt("cannot read \(path)") {
                chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            }
            if n == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<n])
        }
    }

    /// The place `placectl own add KEY NAME --at LAT,LON --radius M [--kind K]` describes; KEY may be
    /// given with its `own:`.
    public static func place(key: String, name: String, at position: String, radius: Double, kind: String?)
        throws(UsageError) -> OwnPlace
    {
        let id = key.hasPrefix(OwnPlace.idPrefix) ? key : OwnPlace.idPrefix + key
        let parts = position.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 2, let latitude = Double(parts[0]), let longitude = Double(parts[1]) else {
            throw UsageError("--at must be LAT,LON in degrees, not '\(position)'", command: "placectl own")
        }
        let place = OwnPlace(
            id: id, name: name, kind: kind ?? OwnPlace.defaultKind,
            geometry: .circle(centre: Coordinate(latitude: latitude, longitude: longitude), radius: radius))
        if let problem = place.problem() {
            throw UsageError(OwnPlaceError(feature: nil, id: id, problem).description, command: "placectl own")
        }
        return place
    }

    /// An id as `own remove` takes it: `own:KEY`, or the bare KEY.
    public static func id(_ argument: String) -> String {
        argument.hasPrefix(OwnPlace.idPrefix) || argument.contains(":") ? argument : OwnPlace.idPrefix + argument
    }

    /// `placectl own list`: one line a place, id, name, kind and shape.
    public static func listing(_ reply: [String: JSON]) -> String {
        let features = reply["places"]?.array ?? []
        guard !features.isEmpty else { return "no own places\n" }
        var rows: [(String, String, String, String)] = []
        for feature in features {
            guard let place = try? OwnPlace(geoJSON: feature) else { continue }
            let shape: String
            switch place.geometry {
            case let .circle(centre, radius):
                shape = "\(radius.formatted(decimals: 0)) m around \(centre)"
            case .polygons(let polygons):
                let count = place.geometry.vertexCount
                shape = (polygons.count == 1 ? "polygon" : "\(polygons.count) polygons") + ", \(count) positions"
            }
            rows.append((place.id, place.name, place.kind, shape))
        }
        let idWidth = rows.map(\.0.count).max() ?? 0
        let nameWidth = rows.map(\.1.count).max() ?? 0
        let kindWidth = rows.map(\.2.count).max() ?? 0
        func padded(_ text: String, _ width: Int) -> String {
            text + String(repeating: " ", count: max(0, width - text.count))
        }
        return rows.map {
            "\(padded($0.0, idWidth))  \(padded($0.1, nameWidth))  \(padded($0.2, kindWidth))  \($0.3)\n"
        }.joined()
    }
}

/// A GeoJSON file of own places refused: the file and the feature at fault.
public struct OwnPlacesFileError: Error, CustomStringConvertible {
    public let path: String
    public let error: OwnPlaceError
    public var description: String { "\(path): \(error)" }
}
