import PlacedCore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A mistake in a configuration file, with where it is.
public struct ConfigError: Error, Equatable, CustomStringConvertible {
    public let file: String
    public let line: Int
    public let message: String

    public var description: String { line > 0 ? "\(file):\(line): \(message)" : "\(file): \(message)" }
}

/// placed.conf in systemd's INI style: `[Section]`, `Key=value`, `#` and `;` comments. The main
/// file is read first, then `placed.conf.d/*.conf` in lexical order; a later value wins.
public enum ConfigFile {
    /// Applies `path` (if it exists) and its drop-ins to `configuration`. A missing main file is
    /// fine (defaults apply); an unreadable one, an unknown section or key, or a bad value is an error.
    public static func load(_ path: String, into configuration: inout Configuration) throws(ConfigError) {
        for file in [path] + dropIns(of: path) {
            guard let text = try readIfPresent(file) else { continue }
            try apply(text, file: file, to: &configuration)
        }
    }

    public static func apply(_ text: String, file: String, to configuration: inout Configuration)
        throws(ConfigError)
    {
        var section: String?
        var lineNumber = 0
        // "\r\n" is one Character, never equal to "\n": a CRLF file would be one line (and one that
        // starts with a comment would be ignored whole).
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            lineNumber += 1
            let line = rawLine.trimmingWhitespace()
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]"), line.count > 2 else {
                    throw ConfigError(file: file, line: lineNumber, message: "malformed section header '\(line)'")
                }
                let name = String(line.dropFirst().dropLast())
                guard Settings.all.contains(where: { $0.section == name }) else {
                    throw ConfigError(file: file, line: lineNumber, message: "unknown section [\(name)]")
                }
                section = name
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw ConfigError(file: file, line: lineNumber, message: "expected Key=value, not '\(line)'")
            }
            let key = String(line[..<equals]).trimmingWhitespace()
            let value = String(line[line.index(after: equals)...]).trimmingWhitespace()
            guard let section else {
                throw ConfigError(file: file, line: lineNumber, message: "'\(key)' must be inside a [Section]")
            }
            guard let setting = Settings.all.first(where: { $0.section == section && $0.key == key }) else {
                throw ConfigError(file: file, line: lineNumber, message: "unknown key '\(key)' in [\(section)]")
            }
            do {
                try setting.apply(value, .file, &configuration)
            } catch {
                throw ConfigError(file: file, line: lineNumber, message: "\(key)=\(value): \(error.fileMessage)")
            }
        }
    }

    /// `configuration` in this file's syntax, every key with its value: what `placed --check-config`
    /// prints, and read back it gives the same configuration.
    public static func effective(_ configuration: Configuration) -> String {
        var text = ""
        var section = ""
        for setting in Settings.all {
            if setting.section != section {
                section = setting.section
                text += (text.isEmpty ? "" : "\n") + "[\(section)]\n"
            }
            if let value = setting.value(configuration) { text += "\(setting.key)=\(value)\n" }
        }
        return text
    }

    static func dropIns(of path: String) -> [String] {
        let directory = path + ".d"
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name.hasSuffix(".conf"), !name.hasPrefix(".") { names.append(name) }
        }
        return names.sorted().map { "\(directory)/\($0)" }
    }

    static func readIfPresent(_ path: String) throws(ConfigError) -> String? {
        let fd: Int32
        do {
            fd = try checkPOSIX(open(path, O_RDONLY | O_CLOEXEC), "open")
        } catch {
            if error.errno == ENOENT { return nil }
            throw ConfigError(file: path, line: 0, message: error.reason)
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n: Int
            do {
                n = try retryingOnInterrupt("read") { read(fd, &buffer, buffer.count) }
            } catch {
                throw ConfigError(file: path, line: 0, message: error.reason)
            }
            if n == 0 { break }
            bytes += buffer[0..<n]
            if bytes.count > 1 << 20 { throw ConfigError(file: path, line: 0, message: "larger than 1 MiB") }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ConfigError(file: path, line: 0, message: "not UTF-8 text")
        }
        return text
    }
}

extension StringProtocol {
    func trimmingWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        guard let first = firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = lastIndex(where: { !isSpace($0) })!
        return String(self[first...last])
    }
}
