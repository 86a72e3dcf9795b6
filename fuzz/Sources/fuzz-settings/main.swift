import FuzzSupport
import PlacedDaemon

#if canImport(Glibc)
    import Glibc
#endif

/// placed's configuration as it starts: the file, one drop-in and the flags, read by the
/// `ConfigurationLoader` that placed and SIGHUP use. Input: the file's text, NUL, the drop-in's text,
/// then the flags, NUL-separated. What `placed --check-config` prints (`ConfigFile.effective`) must read
/// back as a configuration that prints the same.
private let directory = makeScratchDirectory("placed-fuzz-settings")
private let configPath = directory + "/placed.conf"
private let dropInDirectory = configPath + ".d"
private let dropInPath = dropInDirectory + "/10-fuzz.conf"
private let ready: Bool = {
    mkdir(dropInDirectory, 0o700)
    atexit {
        unlink(dropInPath)
        rmdir(dropInDirectory)
    }
    return true
}()

runFuzzer { input in
    precondition(ready)
    let parts = input.parts
    writeFile(configPath, parts.first ?? [])
    writeFile(dropInPath, parts.count > 1 ? parts[1] : [])
    let flags = parts.dropFirst(2).map { String(decoding: $0, as: UTF8.self) }
    let command: PlacedCommand
    do {
        command = try ConfigurationLoader(arguments: ["--config", configPath] + flags).command()
    } catch {
        _ = "\(error)"
        return
    }
    switch command {
    case .run(let configuration), .check(let configuration):
        let printed = ConfigFile.effective(configuration)
        var again = Configuration()
        do {
            try ConfigFile.apply(printed, file: "effective", to: &again)
        } catch {
            fatalError("the effective configuration does not read back: \(error)\n\(printed)")
        }
        let reprinted = ConfigFile.effective(again)
        if reprinted != printed {
            fatalError("the effective configuration reads back different:\n\(printed)\nthen\n\(reprinted)")
        }
    case .help, .version: break
    }
}
