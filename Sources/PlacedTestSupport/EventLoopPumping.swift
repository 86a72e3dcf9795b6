import Foundation

import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

// The servers under test run on an EventLoop driven from the test's own thread, while clients
// (sockets, busctl, gdbus, python) talk to them: these helpers turn the loop while waiting.

extension EventLoop {
    /// Runs the loop until `condition` holds; false if it still does not after `seconds`.
    @discardableResult
    public func pump(seconds: Double = 10, until condition: () throws -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while try !condition() {
            if Date() > deadline { return false }
            try runOnce(timeout: 5_000)
        }
        return true
    }
}

public struct ProcessResult {
    public var status: Int32
    public var output: String
    public var errors: String
}

/// Runs a program to its end while `loop` serves it; `step` runs between loop iterations.
public func run(
    _ arguments: [String], pumping loop: EventLoop, seconds: Double = 30, whileRunning step: () throws -> Void = {}
) throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: arguments[0])
    process.arguments = Array(arguments.dropFirst())
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    let finished = try loop.pump(seconds: seconds) {
        try step()
        return !process.isRunning
    }
    // SIGKILL: the test runner's threads block SIGTERM, and children inherit that mask.
    if !finished { kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
    return ProcessResult(
        status: process.terminationStatus,
        output: String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self),
        errors: String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
}

/// A new empty directory under /tmp (mode 0700).
public func makeTemporaryDirectory(_ prefix: String) -> String {
    var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
    return String(cString: mkdtemp(&template)!)
}
