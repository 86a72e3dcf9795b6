import Foundation
import PlacedCore
import Testing

@testable import PlacedStore

/// Putting a finished places file in place: the replaced file's mode and owner kept (an import under
/// root's umask 027 made a file placed could not read), and nothing swapped in under the temporary name
/// given them.
@Suite struct PlaceFileInstallTests {
    static let places = [
        Place(
            id: "osm:node/1", name: "Café Ekberg", kind: "amenity=cafe",
            coordinate: Coordinate(latitude: 60.1642, longitude: 24.9380))
    ]

    static func status(_ path: String) -> stat {
        var status = stat()
        #expect(stat(path, &status) == 0)
        return status
    }

    @Test func anImportKeepsTheModeAndOwnerOfTheFileItReplaces() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("places.db")
        try PlaceDatabase.replace(at: path, with: Self.places)
        let nobody: uid_t = 65_534
        #expect(chmod(path, 0o640) == 0 && chown(path, nobody, nobody) == 0)
        try PlaceDatabase.replace(at: path, with: Self.places)  // made 0644 and root's, as umask 022 makes it
        let replaced = Self.status(path)
        #expect(replaced.st_mode & 0o7777 == 0o640)
        #expect(replaced.st_uid == nobody && replaced.st_gid == nobody)
        #expect(directory.leftovers.isEmpty)
    }

    @Test func onlyTheProcesssOwnFileWithOneNameIsReopened() throws {
        let directory = TemporaryDirectory()
        let own = directory.file("own")
        #expect(FileManager.default.createFile(atPath: own, contents: Data([1])))
        let descriptor = try PlaceDatabase.reopenOwnFile(own)
        close(descriptor)

        let target = directory.file("target")
        #expect(FileManager.default.createFile(atPath: target, contents: Data([2])))
        let link = directory.file("link")
        #expect(symlink(target, link) == 0)
        let hardLink = directory.file("hard")
        #expect(Glibc.link(target, hardLink) == 0)
        let foreign = directory.file("foreign")
        #expect(FileManager.default.createFile(atPath: foreign, contents: Data([3])))
        #expect(chown(foreign, 65_534, 65_534) == 0)
        for swapped in [link, hardLink, foreign] {
            #expect(throws: PlaceDatabaseError.self, "\(swapped)") { _ = try PlaceDatabase.reopenOwnFile(swapped) }
        }
    }
}
