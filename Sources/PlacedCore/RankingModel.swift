/// The tunable constants of the likelihood model (docs/DESIGN.md, "Likelihood model").
///
/// Weights are relative: only their ratios matter between places, and their size against
/// `noneWeightAtRest` sets how sure a ranking is that the device is at one of them at all.
public struct RankingModel: Sendable, Equatable {
    /// What the model assumes about a kind of place before it sees a fix.
    public struct KindPrior: Sendable, Equatable {
        /// How often a device is at this kind of place rather than another, relative to 1.
        public var weight: Double
        /// Radius in metres of a place mapped as a point: the premises around the node.
        public var pointExtent: Double

        public init(weight: Double, pointExtent: Double = RankingModel.defaultPointExtent) {
            self.weight = weight
            self.pointExtent = pointExtent
        }
    }

    public static let defaultPointExtent = 8.0

    /// Priors by exact kind (`amenity=cafe`) or by key alone (`shop`), looked up in that order.
    public var kinds: [String: KindPrior]
    /// For a kind found neither way.
    public var otherKinds: KindPrior
    /// β: a place selected n times before, anywhere, has its weight multiplied by (1 + n)^β. 0 by
    /// default: learning from picks where they were made (`PickMemory`) replaces it. On top of it, a
    /// global prior changed rankings far from every pick, cost one-off visits and calibration
    /// (`placed-bench learn --global-exponent 0.3`).
    public var selectionExponent: Double
    /// Weight of "none of these" for a device at rest.
    public var noneWeightAtRest: Double
    /// Speed in m/s at which the "none of these" weight has doubled; it grows with the square of speed.
    public var noneSpeedScale: Double
    /// 1-σ accuracy in metres assumed for a fix that states none (a consumer receiver in a street).
    public var defaultAccuracy: Double
    /// Floor for σ: no receiver is better, and it keeps every density finite.
    public var minimumAccuracy: Double
    /// Search radius R = clamp(accuracy + searchMargin, minimumSearchRadius, maximumSearchRadius).
    public var searchMargin: Double
    public var minimumSearchRadius: Double
    public var maximumSearchRadius: Double
    /// A place closed at the fix's time (by its opening hours, as the caller evaluates them) has its
    /// weight multiplied by this; open or unknown, by 1 (`ClosedWeight=`). Not 0: hours in the data go
    /// stale, and staff, deliveries and a look at the door happen while a place is closed.
    public var closedWeight: Double

    /// Tuned on `placed-bench snap --hours --seed 1` (seed 2 held out): the weight with the best mean log
    /// likelihood of the true place when 5 % of visits are at any time, open or closed.
    public static let defaultClosedWeight = 0.05

    public init(
        kinds: [String: KindPrior] = RankingModel.standardKinds,
        otherKinds: KindPrior = KindPrior(weight: 1),
        selectionExponent: Double = 0,
        noneWeightAtRest: Double = 1,
        noneSpeedScale: Double = 2,
        defaultAccuracy: Double = 25,
        minimumAccuracy: Double = 1,
        searchMargin: Double = 50,
        minimumSearchRadius: Double = 50,
        maximumSearchRadius: Double = 250,
        closedWeight: Double = RankingModel.defaultClosedWeight
    ) {
        self.kinds = kinds
        self.otherKinds = otherKinds
        self.selectionExponent = selectionExponent
        self.noneWeightAtRest = noneWeightAtRest
        self.noneSpeedScale = noneSpeedScale
        self.defaultAccuracy = defaultAccuracy
        self.minimumAccuracy = minimumAccuracy
        self.searchMargin = searchMargin
        self.minimumSearchRadius = minimumSearchRadius
        self.maximumSearchRadius = maximumSearchRadius
        self.closedWeight = closedWeight
    }

    public static let standard = RankingModel()

    /// The prior of `kind` (`key=value`): the exact kind, else its key, else `otherKinds`.
    public func prior(ofKind kind: String) -> KindPrior {
        if let exact = kinds[kind] { return exact }
        if let separator = kind.utf8.firstIndex(of: UInt8(ascii: "=")),
            let byKey = kinds[String(kind[..<separator])]
        {
            return byKey
        }
        return otherKinds
    }

    /// σ in metres for a fix's stated accuracy.
    public func sigma(accuracy: Double?) -> Double {
        max(accuracy ?? defaultAccuracy, minimumAccuracy)
    }

    /// R in metres: places whose footprint lies further from the fix are not candidates.
    public func searchRadius(accuracy: Double?) -> Double {
        min(max(sigma(accuracy: accuracy) + searchMargin, minimumSearchRadius), maximumSearchRadius)
    }

    /// w₀(v) = noneWeightAtRest · (1 + (v / noneSpeedScale)²). Unknown speed counts as rest: a kiosk's
    /// static location states none.
    public func noneWeight(speed: Double?) -> Double {
        let ratio = (speed ?? 0) / noneSpeedScale
        return noneWeightAtRest * (1 + ratio * ratio)
    }

    /// The first constant that makes the model meaningless, or nil.
    public var problem: String? {
        func positive(_ value: Double) -> Bool { value.isFinite && value > 0 }
        for (kind, prior) in kinds
        where !positive(prior.weight) || !(prior.pointExtent >= 0) || !prior.pointExtent.isFinite {
            return "kind \(kind): weight must be > 0 and point extent >= 0"
        }
        if !positive(otherKinds.weight) || !(otherKinds.pointExtent >= 0)
            || !otherKinds.pointExtent.isFinite
        {
            return "other kinds: weight must be > 0 and point extent >= 0"
        }
        if !(selectionExponent >= 0) || !selectionExponent.isFinite {
            return "selection exponent must be >= 0"
        }
        if !positive(noneWeightAtRest) { return "none weight must be > 0" }
        if !positive(noneSpeedScale) { return "none speed scale must be > 0" }
        if !positive(defaultAccuracy) || !positive(minimumAccuracy) { return "accuracies must be > 0" }
        if !(searchMargin >= 0) || !searchMargin.isFinite { return "search margin must be >= 0" }
        if !positive(minimumSearchRadius) || !positive(maximumSearchRadius)
            || minimumSearchRadius > maximumSearchRadius
        {
            return "search radii must be > 0 and minimum <= maximum"
        }
        if !(closedWeight > 0 && closedWeight <= 1) { return "closed weight must be > 0 and <= 1" }
        return nil
    }
}

extension RankingModel {
    /// Where people go, relative to an ordinary place (1): eating, drinking and everyday shopping often;
    /// artworks, memorials, office names and bare buildings rarely. Point extents follow the usual size of
    /// the premises. Tuned by hand on `placed-bench snap --seed 1`; seed 2 is held out
    /// (docs/DESIGN.md, "Likelihood model").
    public static let standardKinds: [String: KindPrior] = [
        // Food and drink.
        "amenity=restaurant": .init(weight: 3),
        "amenity=cafe": .init(weight: 3),
        "amenity=fast_food": .init(weight: 3),
        "amenity=pub": .init(weight: 2.5),
        "amenity=bar": .init(weight: 2.5),
        "amenity=biergarten": .init(weight: 2, pointExtent: 15),
        "amenity=food_court": .init(weight: 2, pointExtent: 15),
        "amenity=ice_cream": .init(weight: 2, pointExtent: 5),
        "amenity=nightclub": .init(weight: 1.5, pointExtent: 12),
        // Shops.
        "shop": .init(weight: 1.5),
        "shop=supermarket": .init(weight: 3, pointExtent: 20),
        "shop=convenience": .init(weight: 3),
        "shop=bakery": .init(weight: 2.5),
        "shop=mall": .init(weight: 2, pointExtent: 40),
        "shop=department_store": .init(weight: 2, pointExtent: 40),
        "shop=kiosk": .init(weight: 1.5, pointExtent: 3),
        // Travel.
        "highway=bus_stop": .init(weight: 1, pointExtent: 4),
        "railway=tram_stop": .init(weight: 1, pointExtent: 6),
        "railway=halt": .init(weight: 1, pointExtent: 15),
        "railway=station": .init(weight: 2, pointExtent: 60),
        "public_transport=station": .init(weight: 2, pointExtent: 60),
        "public_transport=platform": .init(weight: 0.5, pointExtent: 6),
        "public_transport=stop_position": .init(weight: 0.3, pointExtent: 4),
        "amenity=fuel": .init(weight: 2, pointExtent: 20),
        "amenity=charging_station": .init(weight: 1, pointExtent: 6),
        "amenity=parking": .init(weight: 0.5, pointExtent: 20),
        "amenity=bicycle_rental": .init(weight: 0.3, pointExtent: 4),
        "amenity=bicycle_parking": .init(weight: 0.2, pointExtent: 4),
        "aeroway=aerodrome": .init(weight: 1, pointExtent: 500),
        "aeroway=terminal": .init(weight: 2, pointExtent: 100),
        // Stays and sights.
        "tourism=hotel": .init(weight: 2, pointExtent: 20),
        "tourism=hostel": .init(weight: 1.5, pointExtent: 12),
        "tourism=museum": .init(weight: 2, pointExtent: 25),
        "tourism=gallery": .init(weight: 1),
        "tourism=attraction": .init(weight: 1, pointExtent: 15),
        "tourism=artwork": .init(weight: 0.3, pointExtent: 3),
        "tourism=information": .init(weight: 0.3, pointExtent: 3),
        "tourism=viewpoint": .init(weight: 0.5, pointExtent: 5),
        "historic": .init(weight: 0.3, pointExtent: 5),
        // Services.
        "amenity=pharmacy": .init(weight: 2),
        "amenity=bank": .init(weight: 1),
        "amenity=post_office": .init(weight: 1.5),
        "amenity=library": .init(weight: 1.5, pointExtent: 20),
        "amenity=theatre": .init(weight: 1.5, pointExtent: 25),
        "amenity=cinema": .init(weight: 1.5, pointExtent: 25),
        "amenity=place_of_worship": .init(weight: 1, pointExtent: 15),
        "amenity=school": .init(weight: 1, pointExtent: 30),
        "amenity=university": .init(weight: 1, pointExtent: 40),
        "amenity=marketplace": .init(weight: 2, pointExtent: 30),
        "amenity=embassy": .init(weight: 0.5),
        "amenity=atm": .init(weight: 0.3, pointExtent: 2),
        "amenity=toilets": .init(weight: 0.5, pointExtent: 3),
        "amenity=shelter": .init(weight: 0.3, pointExtent: 3),
        "amenity=fountain": .init(weight: 0.3, pointExtent: 5),
        "amenity=vending_machine": .init(weight: 0.1, pointExtent: 1),
        "amenity=post_box": .init(weight: 0.1, pointExtent: 1),
        "amenity=telephone": .init(weight: 0.1, pointExtent: 1),
        "amenity=clock": .init(weight: 0.1, pointExtent: 1),
        "amenity=drinking_water": .init(weight: 0.1, pointExtent: 1),
        "amenity=recycling": .init(weight: 0.1, pointExtent: 3),
        // Work and the rest.
        "office": .init(weight: 0.7),
        "craft": .init(weight: 0.7),
        "club": .init(weight: 0.5),
        "emergency": .init(weight: 0.3, pointExtent: 3),
        "leisure": .init(weight: 1, pointExtent: 15),
        "leisure=playground": .init(weight: 0.5, pointExtent: 15),
        // A named building with nothing else to say for it: rarely the answer.
        "building": .init(weight: 0.2, pointExtent: 15),
    ]
}
