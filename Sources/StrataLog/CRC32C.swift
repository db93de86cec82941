/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of every record, index and
/// snapshot file.
///
/// Slicing-by-8 in portable Swift: about 1–2 GB/s in release builds, which keeps checksumming well
/// below LZ4 decompression in the read path. The check value of "123456789" is 0xE3069283.
import CCRC32C

public enum CRC32C {
    /// Whether the CPU's CRC-32C instruction is used (else the tables below).
    public static let usesHardware = strata_crc32c_hardware_available() == 1

    static let tables: [[UInt32]] = {
        var tables = [[UInt32]](repeating: [UInt32](repeating: 0, count: 256), count: 8)
        for n in 0..<256 {
            var c = UInt32(n)
            for _ in 0..<8 { c = (c & 1) != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
            tables[0][n] = c
        }
        for n in 0..<256 {
            var c = tables[0][n]
            for k in 1..<8 {
                c = tables[0][Int(c & 0xFF)] ^ (c >> 8)
                tables[k][n] = c
            }
        }
        return tables
    }()

    /// A flat copy of the eight tables, so the hot loop indexes one contiguous buffer.
    static let flat: [UInt32] = tables.flatMap { $0 }

    /// The checksum of `bytes`.
    public static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        update(0, bytes)
    }

    /// The checksum of `bytes`.
    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0) }
    }

    /// Continues the checksum `crc` (as returned by a previous call) over `bytes`.
    public static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard usesHardware, let base = bytes.baseAddress else { return softwareUpdate(crc, bytes) }
        return ~strata_crc32c_hardware(~crc, base, bytes.count)
    }

    /// The portable table-driven version, which defines the result (tests compare the two).
    public static func softwareUpdate(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var c = ~crc
        flat.withUnsafeBufferPointer { t in
            guard var p = bytes.baseAddress else { return }
            var remaining = bytes.count
            while remaining >= 8 {
                let word = UInt64(littleEndian: p.loadUnaligned(as: UInt64.self)) ^ UInt64(c)
                c = t[7 * 256 + Int(word & 0xFF)] ^ t[6 * 256 + Int((word >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((word >> 16) & 0xFF)] ^ t[4 * 256 + Int((word >> 24) & 0xFF)]
                    ^ t[3 * 256 + Int((word >> 32) & 0xFF)] ^ t[2 * 256 + Int((word >> 40) & 0xFF)]
                    ^ t[1 * 256 + Int((word >> 48) & 0xFF)] ^ t[0 * 256 + Int(word >> 56)]
                p += 8
                remaining -= 8
            }
            while remaining > 0 {
                c = t[Int((c ^ UInt32(p.load(as: UInt8.self))) & 0xFF)] ^ (c >> 8)
                p += 1
                remaining -= 1
            }
        }
        return ~c
    }
}
