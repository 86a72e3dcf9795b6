import CZlib

/// The one error funnel for zlib: the call's return code and zlib's own message.
struct ZlibError: Error, Equatable, CustomStringConvertible {
    let code: Int32
    let message: String

    var description: String { "zlib error \(code): \(message)" }
}

/// A reusable zlib inflater for whole-buffer blobs of known size: one z_stream, reset per blob.
final class Inflater {
    private let stream: UnsafeMutablePointer<z_stream>

    init() throws(ZlibError) {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let code = placed_inflate_init(stream)
        if code != Z_OK {
            let error = Self.error(code, stream)
            stream.deallocate()
            throw error
        }
    }

    deinit {
        inflateEnd(stream)
        stream.deallocate()
    }

    /// Inflates all of `input` into exactly `output.count` bytes; anything else is an error.
    func inflate(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer)
        throws(ZlibError)
    {
        guard inflateReset(stream) == Z_OK else { throw Self.error(Z_STREAM_ERROR, stream) }
        // zlib never writes through next_in; its header just predates const.
        stream.pointee.next_in = UnsafeMutablePointer(
            mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = uInt(input.count)
        stream.pointee.next_out = output.baseAddress?.assumingMemoryBound(to: Bytef.self)
        stream.pointee.avail_out = uInt(output.count)
        let code = CZlib.inflate(stream, Z_FINISH)
        switch code {
        case Z_STREAM_END:
            guard stream.pointee.total_out == uLong(output.count) else {
                throw ZlibError(
                    code: Z_DATA_ERROR,
                    message: "inflated to \(stream.pointee.total_out) bytes, expected \(output.count)")
            }
        case Z_BUF_ERROR where stream.pointee.avail_out == 0:
            throw ZlibError(
                code: code, message: "inflates to more than the declared \(output.count) bytes")
        case Z_BUF_ERROR:
            throw ZlibError(code: code, message: "compressed data ends early")
        default:
            throw Self.error(code, stream)
        }
    }

    private static func error(_ code: Int32, _ stream: UnsafeMutablePointer<z_stream>) -> ZlibError {
        let message = stream.pointee.msg.map { String(cString: $0) } ?? String(cString: zError(code))
        return ZlibError(code: code, message: message)
    }
}
