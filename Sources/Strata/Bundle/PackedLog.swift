import StrataCore
import StrataLog

/// A store's log as a debug bundle of format 2 holds it (`log.pack`): the same segments,
/// records, positions, timestamps, entries and snapshots as the log directory, in a fraction of
/// its size (a third of a redacted log of a million events, and less when the log repeats
/// itself more). A redacted log is mostly keyed hashes, which no compressor shrinks; what shrinks it
/// is that each object ID, name, replica and value is stored once, and every later use of it is
/// a reference into a table, bit-packed at the width the table's size gives. Unpacking writes
/// the log directory back (``LogCopy/DirectoryWriter``): every entry byte for byte.
///
/// Layout (integers little-endian; `varint`/`svarint` as in the event format):
///
/// | Field | Encoding |
/// |---|---|
/// | magic | `STRATALP` |
/// | version | `u16` = 1, then `u16` reserved = 0 |
/// | log ID | 16 bytes |
/// | unpacked size | `u64`: the bytes of every entry and snapshot payload it unpacks to |
/// | segments | `varint` count; each: first position (`varint`), created (`svarint`), record count (`varint`) |
/// | snapshots | `varint` count; each: position (`varint`), created (`svarint`), payload length (`varint`) |
/// | streams | for each of structure, object references, value references, literals: `varint` chunk count, then per chunk its length unpacked and stored (`varint`s) |
/// | chunks | every chunk's bytes, stream by stream; a chunk stored shorter than unpacked is an LZ4 block |
///
/// The records, in order, are read from the streams (see the event format article, *Debug
/// bundle (format 2)*, for every field). Records follow each other with no gap, from each
/// segment's first position; the snapshots' payloads follow the last record in the literals.
enum PackedLog {
    static let magic = Array("STRATALP".utf8)
    static let version: UInt16 = 1
    /// Table sizes a reader accepts: far above any store's, far below what exhausts memory.
    /// The writer keeps to them too (an entry past a per-transaction limit is kept whole).
    static let maxTable = 1 << 28
    static let maxNames = 1 << 24
    /// Events, fields of an event, adds of a remove, names and other replicas of one transaction.
    static let maxEvents = 1 << 26
    static let maxNameBytes = 1 << 20
    static let maxAssetBytes = 1 << 16
    /// The largest entry a log directory takes (``LogCopy/DirectoryWriter``'s limit).
    static let maxEntryBytes = LogOptions.formatMaxRecordSize - 64
    /// How much larger than the packed log the log it unpacks to may be: far above what a real
    /// log packs to (a third of a redacted log, a hundredth of one that repeats itself
    /// endlessly), so that a small file cannot fill a disk.
    static let maxExpansion = 4096
    static let expansionFloor: UInt64 = 64 << 20
    static let maxUnpacked: UInt64 = 1 << 40

    /// The most a packed log of `packedBytes` may unpack to. A log that packs better than this
    /// (the same large value written over and over) is packed with every entry whole, which
    /// LZ4 alone cannot shrink past the limit.
    static func maxUnpacked(packedBytes: Int) -> UInt64 {
        min(maxUnpacked, UInt64(packedBytes) * UInt64(maxExpansion) + expansionFloor)
    }

    /// Entry kinds in the structure stream.
    static let rawEntry: UInt8 = 0
    static let packedTransaction: UInt8 = 1
    /// The tags whose values go through a table of their own (the others carry no payload, or
    /// are object references, or assets stored whole).
    static let tabled: [EventCodec.Tag] = [.string, .integer, .double, .date, .bytes, .uuid]
    static func table(of tag: UInt8) -> Int? {
        switch tag {
        case EventCodec.Tag.string.rawValue: 0
        case EventCodec.Tag.integer.rawValue: 1
        case EventCodec.Tag.double.rawValue: 2
        case EventCodec.Tag.date.rawValue: 3
        case EventCodec.Tag.bytes.rawValue: 4
        case EventCodec.Tag.uuid.rawValue: 5
        default: nil
        }
    }
}

extension ByteWriter {
    mutating func zigzag(_ v: UInt64) { svarint(Int64(bitPattern: v)) }
}
