import PlacedCore
import PlacedJSON
import PlacedWire

/// What `placectl map` draws: the map layer around a centre, the own places' outlines, the fix with
/// its accuracy circle, the ranked places and the marker. Built from placed's varlink replies
/// (`Current`, `Status`, `Map`, `OwnPlaces`) or directly, so the drawing can be tested without a daemon.
public struct MapScene: Sendable, Equatable {
    public struct Fix: Sendable, Equatable {
        public var coordinate: Coordinate
        /// The 95 % radius in metres, as every accuracy in placed's interfaces; nil when unknown.
        public var accuracy: Double?

        public init(coordinate: Coordinate, accuracy: Double?) {
            self.coordinate = coordinate
            self.accuracy = accuracy
        }
    }

    public struct RankedPlace: Sendable, Equatable {
        public var id: String
        public var name: String
        public var coordinate: Coordinate
        /// 0…1, relative within the ranking.
        public var likelihood: Double

        public init(id: String, name: String, coordinate: Coordinate, likelihood: Double) {
            self.id = id
            self.name = name
            self.coordinate = coordinate
            self.likelihood = likelihood
        }
    }

    public struct Marker: Sendable, Equatable {
        public var title: String
        public var address: String?
        public var coordinate: Coordinate
        /// "open until 21:00", "closed until Mon 07:00": from the place's `Details`, nil when unknown.
        public var hours: String?

        public init(title: String, address: String?, coordinate: Coordinate, hours: String? = nil) {
            self.title = title
            self.address = address
            self.coordinate = coordinate
            self.hours = hours
        }

        /// The hours line of a `Details` place: open or closed, until its `next_change` (RFC 3339 in
        /// the device's offset, read as written: the map is drawn where the device is), with the
        /// weekday when that is another day than `now` (seconds since the epoch) in the same offset.
        public static func hours(details place: JSON?, now: Int) -> String? {
            guard let open = place?["open_now"]?.bool else { return nil }
            let state = open ? "open" : "closed"
            guard let change = place?["next_change"]?.string, change.utf8.count >= 20,
                let year = Int(change.prefix(4)), let month = Int(change.dropFirst(5).prefix(2)),
                let day = Int(change.dropFirst(8).prefix(2))
            else { return state }
            var offset = 0
            if let sign = change.dropFirst(19).first(where: { $0 == "+" || $0 == "-" }),
                let zone = change.split(separator: sign).last, zone.utf8.count == 5,
                let hours = Int(zone.prefix(2)), let minutes = Int(zone.suffix(2))
            {
                offset = (sign == "+" ? 1 : -1) * (hours * 3600 + minutes * 60)
            }
            let today = CivilDateTime(secondsSinceEpoch: now + offset).date
            let date = CivilDate(year: year, month: month, day: day)
            let time = String(change.dropFirst(11).prefix(5))
            let weekdays = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
            let when = date == today ? time : "\(weekdays[date.weekday]) \(time)"
            return "\(state) until \(when)"
        }
    }

    /// The middle of the map.
    public var center: Coordinate
    /// Metres from the centre to the nearer edges (top and bottom of a landscape map).
    public var radius: Double
    public var features: [MapFeature]
    public var fix: Fix?
    /// Best first: pin 1 is the most likely.
    public var places: [RankedPlace]
    public var marker: Marker?
    /// The own places whose shapes come within reach of the map: circles and polygons with holes.
    public var ownPlaces: [OwnPlace]

    public init(
        center: Coordinate, radius: Double, features: [MapFeature], fix: Fix? = nil, places: [RankedPlace] = [],
        marker: Marker? = nil, ownPlaces: [OwnPlace] = []
    ) {
        self.center = center
        self.radius = radius
        self.features = features
        self.fix = fix
        self.places = places
        self.marker = marker
        self.ownPlaces = ownPlaces
    }

    /// The own places of an `OwnPlaces` reply (its Features) whose bounding circle comes within `reach`
    /// metres of `center`; a Feature that does not read as an own place is left out.
    public static func ownPlaces(_ features: [JSON], within reach: Double, of center: Coordinate) -> [OwnPlace] {
        features.compactMap { feature in
            guard let place = try? OwnPlace(geoJSON: feature) else { return nil }
            let (centre, radius) = place.geometry.boundingCircle
            return Geodesy.greatCircleDistance(center, centre) - radius <= reach ? place : nil
        }
    }

    /// The radius to ask `Map` for so that a `width`×`height` map of `radius` (to its nearer edges) is
    /// covered to its corners.
    public static func queryRadius(radius: Double, width: Int, height: Int) -> Double {
        let shorter = Double(min(width, height))
        let halfDiagonal = (Double(width * width + height * height)).squareRoot() / 2
        return radius * halfDiagonal / (shorter / 2)
    }

    /// From the replies of `Current` (location, places), `Status` (marker) and `Map` (features);
    /// `center` nil: the fix's position. Features that do not read as `MapFeature.init(geoJSON:)`
    /// are left out; a reply without `features` is a protocol violation.
    public init(
        current: [String: JSON], status: [String: JSON], map: [String: JSON], center: Coordinate?, radius: Double,
        markerHours: String? = nil, ownPlaces: [OwnPlace] = []
    ) throws(ClientError) {
        func coordinate(_ object: JSON?) -> Coordinate? {
            guard let latitude = object?["latitude"]?.double, let longitude = object?["longitude"]?.double else {
                return nil
            }
            let c = Coordinate(latitude: latitude, longitude: longitude)
            return c.isValid ? c : nil
        }
        let location = current["location"]
        let fix = coordinate(location).map { Fix(coordinate: $0, accuracy: location?["accuracy"]?.double) }
        guard let middle = center ?? fix?.coordinate else {
            throw .unsupported("placed has no location yet: give the map's centre with --at LAT,LON")
        }
        guard let features = map["features"]?.array else {
            throw .protocolViolation("a Map reply without features")
        }
        let places = (current["places"]?.array ?? []).compactMap { place -> RankedPlace? in
            guard let id = place["id"]?.string, let at = coordinate(place) else { return nil }
            return RankedPlace(
                id: id, name: place["name"]?.string ?? id, coordinate: at,
                likelihood: place["likelihood"]?.double ?? 0)
        }
        var marker: Marker?
        if let place = status["marker"]?["place"], let at = coordinate(place) {
            // A marker keeps the name its selection recorded; the ranking has it in the reader's language.
            let ranked = places.first { $0.id == place["id"]?.string }
            marker = Marker(
                title: ranked?.name ?? place["name"]?.string ?? place["id"]?.string ?? "marker",
                address: place["address"]?.string, coordinate: at, hours: markerHours)
        }
        self.init(
            center: middle, radius: radius, features: features.compactMap(MapFeature.init(geoJSON:)), fix: fix,
            places: places, marker: marker, ownPlaces: ownPlaces)
    }
}
