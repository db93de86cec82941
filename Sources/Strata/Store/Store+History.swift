import StrataLog
import Synchronization
public import StrataCore

/// A transaction as stored in the log, with its position.
@_spi(StrataInternals)
public struct StoredTransaction: Sendable, Hashable {
    public var position: UInt64
    /// When it was appended (microseconds since 1970).
    public var timestamp: Int64
    public var transaction: TransactionRecord
}

extension Store {
    /// The transactions stored from `position` on (at most `limit`), in log order. With
    /// `forSync`, local-only attributes are stripped (they are never pushed). Transactions a fork
    /// abandoned (see `StoreIdentity.isAbandoned(header:position:)`) are not part of the
    /// store's history and are left out.
    @_spi(StrataInternals)
    public func transactions(from position: UInt64 = 0, limit: Int = .max, forSync: Bool = false) throws -> [StoredTransaction] {
        let (schema, identity) = core.withLock { ($0.projection.schema, $0.identity) }
        var result: [StoredTransaction] = []
        do {
            var cursor = try log.records(from: max(position, log.startPosition))
            while result.count < limit, let record = try cursor.next() {
                for entry in record.entries where entry.position >= position && result.count < limit {
                    // An adoption record is not a transaction (it holds no events to push or show).
                    if AdoptionRecord.isAdoption(entry.payload) { continue }
                    if !identity.lineage.isEmpty,
                       identity.isAbandoned(header: try TransactionHeader(decoding: entry.payload, position: entry.position), position: entry.position) {
                        continue
                    }
                    var transaction = try EventCodec.decode(entry.payload, position: entry.position)
                    if forSync { transaction = transaction.strippingLocalOnly(schema) }
                    result.append(StoredTransaction(position: entry.position, timestamp: entry.timestamp, transaction: transaction))
                }
            }
        } catch let error as LogError {
            throw StoreError(error)
        }
        return result
    }
}

extension TransactionRecord {
    /// The transaction without local-only attributes (as pushed to other replicas).
    @_spi(StrataInternals)
    public func strippingLocalOnly(_ schema: Schema) -> TransactionRecord {
        var copy = self
        copy.events = events.map { event in
            var event = event
            switch event.change {
            case .insert(let entity, let object, let fields):
                event.change = .insert(entity: entity, object: object, fields: fields.filter { !schema.isLocalOnly(entity, $0.key) })
            case .update(let entity, let object, let fields):
                event.change = .update(entity: entity, object: object, fields: fields.filter { !schema.isLocalOnly(entity, $0.key) })
            default:
                break
            }
            return event
        }
        return copy
    }
}

extension Schema {
    func isLocalOnly(_ entity: String, _ attribute: String) -> Bool {
        self.entity(entity)?.attribute(attribute)?.isLocalOnly ?? false
    }

    /// Whether any attribute is local-only (else a stored transaction is pushed as it is).
    var hasLocalOnlyAttributes: Bool {
        entities.contains { $0.attributes.contains(where: \.isLocalOnly) }
    }
}
