import CGPS
import PlacedSystem

/// libgps, opened when `GPSDSource` first connects. placed does not link it: libgps brings libdbus and
/// libstdc++, whose symbol relocations were half of the dynamic loader's work at every start, and a
/// kiosk on a static position never talks to gpsd. Each function is called through a pointer of the
/// type its header declares (CGPS/shim.h); the soname is the one of the headers placed is built with
/// (Debian 12's libgps-dev: libgps28), since `gps_data_t`'s layout is that version's.
struct GPSLibrary: @unchecked Sendable {
    static let soname = "libgps.so.28"

    let open: placed_gps_open_fn
    let close: placed_gps_close_fn
    let read: placed_gps_read_fn
    let stream: placed_gps_stream_fn
    let errorString: placed_gps_errstr_fn

    /// The library, opened once per process; the same failure every time it cannot be.
    static func shared() throws(GPSLibraryError) -> GPSLibrary {
        switch loaded {
        case .success(let library): return library
        case .failure(let error): throw error
        }
    }

    private static let loaded: Result<GPSLibrary, GPSLibraryError> = {
        do throws(GPSLibraryError) {
            return .success(try GPSLibrary())
        } catch {
            return .failure(error)
        }
    }()

    private init() throws(GPSLibraryError) {
        let library: SharedLibrary
        do { library = try SharedLibrary(Self.soname) } catch { throw GPSLibraryError(reason: error.reason) }
        func symbol<Function>(_ name: String, as type: Function.Type) throws(GPSLibraryError) -> Function {
            guard let function = library.function(name, as: type) else {
                throw GPSLibraryError(reason: "it has no \(name)")
            }
            return function
        }
        open = try symbol("gps_open", as: placed_gps_open_fn.self)
        close = try symbol("gps_close", as: placed_gps_close_fn.self)
        read = try symbol("gps_read", as: placed_gps_read_fn.self)
        stream = try symbol("gps_stream", as: placed_gps_stream_fn.self)
        errorString = try symbol("gps_errstr", as: placed_gps_errstr_fn.self)
    }
}

/// libgps could not be opened: the source says so and retries, as when gpsd is unreachable.
struct GPSLibraryError: Error, CustomStringConvertible {
    let reason: String
    var description: String { "cannot load \(GPSLibrary.soname) (Debian package libgps28): \(reason)" }
}
