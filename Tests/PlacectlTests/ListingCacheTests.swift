import Foundation
import PlacectlKit
import Testing

@Suite struct ListingCacheTests {
    @Test func locationFollowsTheEnvironment() {
        #expect(
            ListingCache(environment: ["XDG_RUNTIME_DIR": "/run/user/1000", "HOME": "/home/u"])?.path
                == "/run/user/1000/placectl/last-places")
        #expect(
            ListingCache(environment: ["XDG_CACHE_HOME": "/c", "HOME": "/home/u"])?.path == "/c/placectl/last-places")
        #expect(ListingCache(environment: ["HOME": "/home/u"])?.path == "/home/u/.cache/placectl/last-places")
        #expect(
            ListingCache(environment: ["XDG_RUNTIME_DIR": "relative", "HOME": "/h"])?.path
                == "/h/.cache/placectl/last-places", "relative directories are ignored, as the XDG spec says")
        #expect(ListingCache(environment: [:]) == nil)
    }

    @Test func savedIdsComeBackInOrder() throws {
        let directory = NSTemporaryDirectory() + "placectl-cache-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = ListingCache(path: directory + "/placectl/last-places")
        #expect(cache.load() == nil)
        try cache.save(["osm:way/1", "osm:node/2"])
        #expect(cache.load() == ["osm:way/1", "osm:node/2"])
        try cache.save(["osm:node/3"])
        #expect(cache.load() == ["osm:node/3"], "a new listing replaces the old")
        let mode = try FileManager.default.attributesOfItem(atPath: directory + "/placectl")[.posixPermissions] as? Int
        #expect(mode == 0o700)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory + "/placectl") == ["last-places"])
    }

    @Test func anUnwritableDirectoryIsAnError() {
        let cache = ListingCache(path: "/proc/placectl-test/last-places")
        #expect(throws: ListingCache.SaveError.self) { try cache.save(["x"]) }
    }

    @Test func rowsAndIds() {
        let listing = ["osm:way/1", "osm:node/2", "osm:node/3"]
        #expect(ListingCache.target(of: "2", listing: listing) == .row(2, id: "osm:node/2"))
        #expect(ListingCache.target(of: "2", listing: nil) == .id("2"), "no listing: a plain id")
        #expect(ListingCache.target(of: "4", listing: listing) == .id("4"), "beyond the listing: a plain id")
        #expect(ListingCache.target(of: "0", listing: listing) == .id("0"))
        #expect(ListingCache.target(of: "1", listing: []) == .id("1"))
        #expect(ListingCache.target(of: "+1", listing: listing) == .id("+1"))
        #expect(ListingCache.target(of: "١", listing: listing) == .id("١"), "only ASCII digits")
        #expect(ListingCache.target(of: "osm:node/2", listing: listing) == .id("osm:node/2"))
        #expect(ListingCache.target(of: "3", listing: listing).id == "osm:node/3")
    }
}
