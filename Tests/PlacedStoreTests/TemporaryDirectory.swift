import Foundation

/// A fresh directory per test, removed afterwards.
final class TemporaryDirectory {
    let path: String

    init() {
        var template = Array((NSTemporaryDirectory() + "placed-store-XXXXXX").utf8CString)
        path = String(cString: mkdtemp(&template)!)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func file(_ name: String) -> String { path + "/" + name }

    var leftovers: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter {
            $0.contains(".new-")
        }
    }
}
