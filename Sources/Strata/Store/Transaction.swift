public import StrataCore
/// The mutable view of the store inside ``Store/transaction(_:)``: every change is validated
/// against the schema and the current objects when it is made, and reads see the transaction's
/// own changes. Nothing is written unless the closure returns normally.
///
/// Do not keep it beyond the closure, and do not call the store from inside it (use the
/// transaction's own reads).
public final class Transaction {
    // The state each insert touches is `@exclusivity(unchecked)`, as in `Projection` (see there): a
    // transaction is used by one closure on one thread, and nothing runs inside an access to these.
    let core: StoreCore
    /// The objects ``stampAfter(_:)`` has moved the clock past in this transaction.
    @exclusivity(unchecked) private var stampedAfter: Set<ObjectID> = []
    /// The transaction's events, encoded as they are made: the log entry the commit writes.
    @exclusivity(unchecked) private(set) var encoder: TransactionEncoder
    /// This store's replica in the projection's table (interned at the first insert).
    @exclusivity(unchecked) private var replicaIndex: UInt32?
    /// How inserts of each entity used so far lay out their fields (see ``InsertLayout``).
    @exclusivity(unchecked) private var layouts: [InsertLayout] = []
    /// Per layout: whether it is an app version's (an insert under the app's names) or the
    /// whole stored entity's (a move between zones).
    @exclusivity(unchecked) private var layoutIsApp: [Bool] = []
    /// Per insert, reused: the fields in layout order.
    @exclusivity(unchecked) private var fieldValues: [Value] = []
    /// The layout of the last insert (a transaction mostly inserts one entity at a time).
    @exclusivity(unchecked) private var lastLayout: InsertLayout?
    @exclusivity(unchecked) private var lastLayoutIsApp = false
    /// In a ``Database``: the entity of an object that exists in another of its zones (a
    /// reference may cross zones); `nil` in a plain store, where a target must exist here.
    var outside: ((ObjectID) -> String?)?

    init(core: StoreCore) {
        self.core = core
        encoder = TransactionEncoder(replica: core.replica)
    }

    /// The number of events so far (the encoder's count, kept here: reading it through the
    /// encoder copied the encoder out of this object for every event).
    @exclusivity(unchecked) private(set) var eventCount = 0

    var projection: Projection { core.projection }
    var schema: Schema { core.projection.schema }
    /// The schema under the app's names: its own once any version declared migrations (see
    /// `SchemaView`), else the schema in effect (the app's merged with the recorded one).
    var appSchema: Schema {
        guard core.projection.view != nil, let app = core.projection.appSchema else { return schema }
        return app
    }

    // MARK: Reads (see this transaction's changes)

    public func object(_ id: ObjectID) -> ObjectSnapshot? { projection.appSnapshot(id, includeToMany: true) }

    public func exists(_ id: ObjectID) -> Bool { projection.exists(id) }

    public func related(_ id: ObjectID, _ relationship: String) -> [ObjectID] { projection.appRelated(id, relationship: relationship) }

    public func fetch(_ entity: String, where predicate: ((ObjectSnapshot) -> Bool)? = nil,
                      sortedBy sort: [SortKey] = [], limit: Int? = nil) -> [ObjectSnapshot] {
        Query(entity: entity, predicate: predicate, sort: sort, limit: limit).run(on: projection)
    }

    /// The objects matching `filter`, with this transaction's changes (planned on the indexes;
    /// what the transaction changed so far is checked besides, see
    /// ``Store/fetch(_:matching:sortedBy:limit:)->[ObjectSnapshot]``).
    public func fetch(_ entity: String, matching filter: Filter, sortedBy sort: [SortKey] = [], limit: Int? = nil) -> [ObjectSnapshot] {
        Query(entity: entity, predicate: nil, filter: filter, sort: sort, limit: limit).run(on: projection)
    }

    // MARK: Changes

    /// Inserts a new object with `values` for its attributes and to-one relationships; attributes
    /// not named get their default (or null).
    ///
    /// - Throws: `StoreError` (unknown entity or attribute, wrong type, missing required value,
    ///   an existing ID, a reference to an object that does not exist).
    @discardableResult
    public func insert(_ entity: String, id: ObjectID = ObjectID(), _ values: [String: Value] = [:]) throws -> ObjectID {
        guard let view = projection.view else { return try insert(stored: entity, id: id, values) }
        // The app's names to stored ones; the insert writes this version's fields only.
        let storedEntity = view.storedEntity(entity)
        return try insert(stored: storedEntity, id: id, view.storedValues(values, in: storedEntity), as: view.writeEntity(storedEntity))
    }

    /// An insert under stored names: of `description` when given (an app version's fields),
    /// else of every field the schema in effect knows (a move between zones carries them all).
    @discardableResult
    func insert(stored entity: String, id: ObjectID, _ values: [String: Value], as description: Entity? = nil) throws -> ObjectID {
        let layout = try layout(for: entity, object: id, description: description)
        // The one lookup of the ID: whether it is taken, and, for a deleted object's ID, the
        // newest timestamp the insert must be stamped after (once every check has passed, below).
        let (probe, slot) = projection.insertProbe(id)
        if probe == .exists {
            throw StoreError(.objectExists, "an object with this ID already exists", entity: entity, object: id)
        }
        // Each attribute and to-one relationship looks its value up by name (a value for any
        // other name is refused below, once the values found are counted), then the values are
        // checked. The layout's flat tables serve every insert of the entity: no copy of the
        // schema's descriptions per insert.
        reset(&fieldValues, to: .null, count: layout.names.count)
        var found = 0
        for a in layout.attributeNames.indices {
            let value: Value
            if let given = values[layout.attributeNames[a]] {
                value = given
                found += 1
            } else {
                value = layout.attributeDefaults[a]
            }
            fieldValues[layout.position[a]] = value
        }
        var references: [Value] = []
        for r in layout.toOne {
            let value = values[layout.entity.relationships[r].name]
            if value != nil { found += 1 }
            references.append(value ?? .null)
        }
        if found != values.count { try refuseUnknownKeys(values, layout: layout, object: id) }
        for a in layout.attributeNames.indices {
            try check(fieldValues[layout.position[a]], name: a, in: layout, object: id)
        }
        var derived: [(Relationship, ObjectID)] = []
        for (n, r) in layout.toOne.enumerated() {
            let relationship = layout.entity.relationships[r]
            let target = try checkReference(references[n], relationship, entity: entity, object: id)
            let position = layout.position[layout.attributeNames.count + r]
            if position >= 0 {
                fieldValues[position] = target.map(Value.reference) ?? .null
            } else if let target {
                derived.append((relationship, target))
            }
        }
        if case .deleted(let newest) = probe, stampedAfter.insert(id).inserted {
            // Reusing a deleted object's ID: the insert must be newer than the delete. (Only an
            // insert that will be written moves the clock.)
            core.clock.advance(past: HLC(rawValue: newest))
        }
        try emitInsert(layout, object: id, slot: slot)
        if layout.hasReferenceFields {
            var fields: [String: Value] = [:]
            for (name, value) in zip(layout.names, fieldValues) { fields[name] = value }
            try claimOneToOne(entity: entity, object: id, fields: fields)
        }
        for (relationship, target) in derived { try setToOne(id, entity: entity, relationship, target) }
        return id
    }

    /// Changes some attributes and to-one relationships of an existing object.
    public func update(_ id: ObjectID, _ values: [String: Value]) throws {
        let entity = try existingEntity(id)
        let view = projection.view
        let values = view?.storedValues(values, in: entity) ?? values
        guard let description = view?.writeEntity(entity) ?? schema.entity(entity) else {
            throw StoreError(.unknownEntity, "entity \(entity) is not in this app's schema", entity: entity, object: id)
        }
        try checkKeys(values, of: description, object: id)
        var fields: [String: Value] = [:]
        var derived: [(Relationship, ObjectID?)] = []
        for (key, value) in values {
            if let attribute = description.attribute(key) {
                try check(value, for: attribute, entity: entity, object: id)
                fields[key] = value
            } else if let relationship = description.relationship(key) {
                let target = try checkReference(value, relationship, entity: entity, object: id)
                if case .field? = projection.storage(entity: entity, relationship: key)?.1 {
                    fields[key] = target.map(Value.reference) ?? .null
                } else {
                    derived.append((relationship, target))
                }
            }
        }
        if !fields.isEmpty {
            try emit(.update(entity: entity, object: id, fields: fields))
            try claimOneToOne(entity: entity, object: id, fields: fields)
        }
        for (relationship, target) in derived { try setToOne(id, entity: entity, relationship, target) }
    }

    /// Sets one attribute or to-one relationship.
    public func set(_ id: ObjectID, _ key: String, _ value: Value) throws {
        try update(id, [key: value])
    }

    /// Deletes an object, applying the delete rules of its relationships: cascade deletes the
    /// related objects, nullify clears their references, deny refuses while any exist.
    ///
    /// A refused delete changes nothing: what the cascade would reach is worked out and checked
    /// against every deny rule before the first event is written, so a caller that catches the
    /// error goes on with the transaction as it was.
    ///
    /// - Throws: `StoreError.Code.objectNotFound`; `StoreError.Code.deleteDenied` naming the
    ///   object and relationship that deny it.
    public func delete(_ id: ObjectID) throws {
        let entity = try existingEntity(id)
        try checkDenyRules(deleting: id, entity: entity)
        // Which objects this one delete has visited, so that a cascade cycle ends. It lives for
        // this call only: once deleted, an object is absent from the projection, and anything
        // this transaction does to it later (a re-insert, another delete) must be done again.
        var visited: Set<ObjectID> = []
        try delete(id, entity: entity, visited: &visited)
    }

    /// Deletes `id` as a move to another zone does: the delete event alone, without the delete
    /// rules (nothing the object relates to is deleted, denied or nullified — the object lives
    /// on in the other zone).
    func deleteMovingOut(_ id: ObjectID) throws {
        let entity = try existingEntity(id)
        try emit(.delete(entity: entity, object: id))
    }

    /// Adds `target` to the to-many relationship `relationship` of `id`.
    ///
    /// An add of a member that is already present still writes an add event: the set is
    /// add-wins, and a remove another device makes concurrently names only the adds it had seen,
    /// so this add keeps the member there — what the caller asked for. (Skipping it would let
    /// the concurrent remove win.)
    public func add(_ id: ObjectID, _ relationship: String, _ target: ObjectID) throws {
        let entity = try existingEntity(id)
        try add(id, stored: projection.view?.storedKey(relationship, in: entity) ?? relationship, target)
    }

    /// An add under the relationship's stored name.
    func add(_ id: ObjectID, stored relationship: String, _ target: ObjectID) throws {
        let entity = try existingEntity(id)
        let r = try toMany(relationship, of: entity, object: id)
        _ = try checkReference(.reference(target), r, entity: entity, object: id)
        switch projection.storage(entity: entity, relationship: relationship)?.1 {
        case .derived(let otherEntity, let other, let storedIsToMany)?:
            if storedIsToMany {
                try emit(.add(entity: otherEntity, object: target, relationship: other, target: id))
            } else {
                try emit(.update(entity: otherEntity, object: target, fields: [other: .reference(id)]))
            }
        default:
            try emit(.add(entity: entity, object: id, relationship: relationship, target: target))
        }
    }

    /// Removes `target` from the to-many relationship `relationship` of `id` (a no-op when it is
    /// not there).
    public func remove(_ id: ObjectID, _ relationship: String, _ target: ObjectID) throws {
        let entity = try existingEntity(id)
        let relationship = projection.view?.storedKey(relationship, in: entity) ?? relationship
        _ = try toMany(relationship, of: entity, object: id)
        switch projection.storage(entity: entity, relationship: relationship)?.1 {
        case .derived(let otherEntity, let other, let storedIsToMany)?:
            if storedIsToMany {
                try removeFromSet(target, entity: otherEntity, key: other, member: id)
            } else if projection.snapshot(target)?[other] == .reference(id) {
                try emit(.update(entity: otherEntity, object: target, fields: [other: .null]))
            }
        default:
            try removeFromSet(id, entity: entity, key: relationship, member: target)
        }
    }

    /// Checks that `targets` may be added to `relationship` of `object` (an `entity`): the
    /// relationship is to-many and every target exists as its destination — what `add(_:_:_:)`
    /// checks, done before anything is written so that a typed insert or update that would fail
    /// part way writes nothing. With `inserting`, `object` itself may be a target (it exists by
    /// the time it is added).
    func checkMembers(_ targets: [ObjectID], of relationship: String, entity: String, object: ObjectID, inserting: Bool) throws {
        // The app's names (a model's) to stored ones.
        let entity = projection.storedEntity(entity)
        let relationship = projection.view?.storedKey(relationship, in: entity) ?? relationship
        let r = try toMany(relationship, of: entity, object: object)
        for target in targets where !(inserting && target == object && r.destination == entity) {
            _ = try checkReference(.reference(target), r, entity: entity, object: object)
        }
    }

    // MARK: Internals

    private func emit(_ change: Change) throws {
        if let object = change.object { stampAfter(object) }
        try appendRaw(Event(id: EventID(replica: core.replica, sequence: core.nextSequence + UInt64(eventCount)),
                        hlc: try core.clock.tick(), change: change))
    }

    /// Moves the clock past every timestamp `object` holds, so that the edit about to be stamped
    /// is newer than what it was made on. The clock takes in remote timestamps only up to its
    /// wall clock + `StoreOptions.maxClockLead` (a far-future event must not drag every later
    /// edit along); a device whose wall clock is behind — by hours, by years, before 1970 — would
    /// otherwise stamp its edit of a field before the value it replaces, and the edit would lose
    /// on every device, its own too. Only the objects edited move the clock this far.
    /// Once per object and transaction: after it the clock is past what the object held, and
    /// the transaction's own later events on it are stamped later still (no rescan of a large
    /// set for each of many adds to it).
    private func stampAfter(_ object: ObjectID) {
        guard stampedAfter.insert(object).inserted, let record = projection.records[object] else { return }
        core.clock.advance(past: HLC(rawValue: record.newestHLC))
    }

    /// Applies an event of this transaction to the projection (so later reads see it) and keeps it.
    func appendRaw(_ event: Event) throws {
        let projection = projection
        try projection.apply(event)
        encoder.append(event) { projection.intern($0) }
        eventCount += 1
    }

    /// Emits the insert whose fields `fieldValues` holds in the order of `layout`: applied
    /// with names interned once per transaction, and encoded straight into the entry. The
    /// caller has already moved the clock past a deleted record of the same ID, and gives the
    /// place its one lookup of the ID found (``Projection/insertProbe(_:)``).
    private func emitInsert(_ layout: InsertLayout, object: ObjectID, slot: RecordTable.Slot) throws {
        let projection = projection
        if !layout.interned {
            layout.entityID = projection.intern(layout.entity.name)
            layout.keys = layout.names.map(projection.intern)
            layout.interned = true
        }
        let replica: UInt32
        if let known = replicaIndex {
            replica = known
        } else {
            replica = try projection.internReplica(core.replica)
            replicaIndex = replica
        }
        let hlc = try core.clock.tick().rawValue
        _ = try projection.applyLocalInsert(object, entity: layout.entityID, replica: replica,
                                            sequence: core.nextSequence + UInt64(eventCount), hlc: hlc,
                                            keys: layout.keys, values: fieldValues, slot: slot)
        encoder.insert(hlc: hlc, entity: layout.entityID, layout.entity.name, object: object, fieldCount: layout.names.count)
        for i in layout.names.indices { encoder.field(layout.keys[i], layout.names[i], fieldValues[i]) }
        eventCount += 1
    }

    /// `entity`'s insert layout, made on first use.
    ///
    /// - Throws: `StoreError.Code.unknownEntity`; `StoreError.Code.invalidSchema` for an
    ///   entity that names a field twice (which a checked schema never does).
    private func layout(for entity: String, object: ObjectID, description given: Entity? = nil) throws -> InsertLayout {
        let app = given != nil
        if let last = lastLayout, lastLayoutIsApp == app, last.entityName == entity { return last }
        if let i = layouts.indices.first(where: { layouts[$0].entityName == entity && layoutIsApp[$0] == app }) {
            lastLayout = layouts[i]
            lastLayoutIsApp = app
            return layouts[i]
        }
        guard let description = given ?? schema.entity(entity) else {
            throw StoreError(.unknownEntity, "no entity \(entity) in the schema", entity: entity, object: object)
        }
        var named: [(name: String, source: Int)] = description.attributes.enumerated().map { ($1.name, $0) }
        var hasReferenceFields = false
        for (r, relationship) in description.relationships.enumerated() where !relationship.isToMany {
            if case .field? = projection.storage(entity: entity, relationship: relationship.name)?.1 {
                named.append((relationship.name, description.attributes.count + r))
                hasReferenceFields = true
            }
        }
        let allNames = description.attributes.map(\.name) + description.relationships.map(\.name)
        guard Set(allNames).count == allNames.count else {
            throw StoreError(.invalidSchema, "\(entity) names a field twice", entity: entity, object: object)
        }
        named.sort { $0.name < $1.name }
        var position = [Int](repeating: -1, count: description.attributes.count + description.relationships.count)
        for (i, field) in named.enumerated() { position[field.source] = i }
        let layout = InsertLayout(entity: description, names: named.map(\.name), position: position,
                                  hasReferenceFields: hasReferenceFields)
        layouts.append(layout)
        layoutIsApp.append(app)
        lastLayout = layout
        lastLayoutIsApp = app
        return layout
    }

    /// Forgets the insert layouts made so far (the schema in effect changed: a move widened it).
    func forgetLayouts() {
        layouts = []
        layoutIsApp = []
        lastLayout = nil
    }

    /// Makes `array` `count` copies of `value`, reusing its storage.
    private func reset<T>(_ array: inout [T], to value: T, count: Int) {
        if array.count == count {
            for i in array.indices { array[i] = value }
        } else {
            array = Array(repeating: value, count: count)
        }
    }

    private func existingEntity(_ id: ObjectID) throws -> String {
        guard let record = projection.existing(id) else {
            throw StoreError(.objectNotFound, "no such object", object: id)
        }
        return projection.entityName(of: record)
    }

    private func toMany(_ relationship: String, of entity: String, object: ObjectID) throws -> Relationship {
        guard let r = schema.entity(entity)?.relationship(relationship) else {
            throw StoreError(.unknownAttribute, "no relationship \(relationship)", entity: entity, object: object, attribute: relationship)
        }
        guard r.isToMany else {
            throw StoreError(.typeMismatch, "\(relationship) is to-one: set it with update", entity: entity, object: object, attribute: relationship)
        }
        return r
    }

    private func checkKeys(_ values: [String: Value], of entity: Entity, object: ObjectID) throws {
        for key in values.keys where entity.attribute(key) == nil {
            guard let relationship = entity.relationship(key) else {
                throw StoreError(.unknownAttribute, "no attribute or relationship \(key)", entity: entity.name, object: object, attribute: key)
            }
            if relationship.isToMany {
                throw StoreError(.typeMismatch, "\(key) is to-many: use add and remove", entity: entity.name, object: object, attribute: key)
            }
        }
    }

    /// The error for an insert's value whose name is neither an attribute nor a to-one
    /// relationship of the layout's entity (what the counts of ``insert(stored:id:_:as:)`` found).
    private func refuseUnknownKeys(_ values: [String: Value], layout: InsertLayout, object: ObjectID) throws {
        let entity = layout.entity
        for key in values.keys.sorted() where entity.attribute(key) == nil {
            guard let relationship = entity.relationship(key) else {
                throw StoreError(.unknownAttribute, "no attribute or relationship \(key)", entity: entity.name, object: object, attribute: key)
            }
            if relationship.isToMany {
                throw StoreError(.typeMismatch, "\(key) is to-many: use add and remove", entity: entity.name, object: object, attribute: key)
            }
        }
    }

    /// ``check(_:for:entity:object:)`` on the layout's tables (the attribute's name, type and
    /// optionality are read only for an error).
    private func check(_ value: Value, name a: Int, in layout: InsertLayout, object: ObjectID) throws {
        if value == .null {
            if !layout.attributeOptional[a] {
                throw StoreError(.missingRequiredValue, "\(layout.attributeNames[a]) is required", entity: layout.entity.name, object: object, attribute: layout.attributeNames[a])
            }
            return
        }
        guard value.attributeType == layout.attributeTypes[a] else {
            throw StoreError(.typeMismatch, "expected a \(layout.attributeTypes[a]), got \(value)", entity: layout.entity.name, object: object, attribute: layout.attributeNames[a])
        }
    }

    private func check(_ value: Value, for attribute: Attribute, entity: String, object: ObjectID) throws {
        if value == .null {
            if !attribute.isOptional {
                throw StoreError(.missingRequiredValue, "\(attribute.name) is required", entity: entity, object: object, attribute: attribute.name)
            }
            return
        }
        guard value.attributeType == attribute.type else {
            throw StoreError(.typeMismatch, "expected a \(attribute.type), got \(value)", entity: entity, object: object, attribute: attribute.name)
        }
    }

    /// The target of a to-one value, checked to exist and to be of the destination entity.
    private func checkReference(_ value: Value, _ relationship: Relationship, entity: String, object: ObjectID) throws -> ObjectID? {
        switch value {
        case .null:
            if !relationship.isOptional && !relationship.isToMany {
                throw StoreError(.missingRequiredValue, "\(relationship.name) is required", entity: entity, object: object, attribute: relationship.name)
            }
            return nil
        case .reference(let target):
            let targetEntity: String
            if let record = projection.existing(target) {
                targetEntity = projection.entityName(of: record)
            } else if let elsewhere = outside?(target) {
                // In another zone of the database: only a relationship this object stores can
                // point there (one stored on the target would write into the other zone).
                if case .derived? = projection.storage(entity: entity, relationship: relationship.name)?.1 {
                    throw StoreError(.invalidReference, "target \(target) is in another zone, and \(relationship.name) is stored on its target: such a relationship cannot cross zones", entity: entity, object: object, attribute: relationship.name)
                }
                targetEntity = elsewhere
            } else {
                throw StoreError(.invalidReference, "target \(target) does not exist", entity: entity, object: object, attribute: relationship.name)
            }
            guard targetEntity == relationship.destination else {
                throw StoreError(.invalidReference, "target \(target) is a \(targetEntity), not a \(relationship.destination)", entity: entity, object: object, attribute: relationship.name)
            }
            return target
        default:
            throw StoreError(.typeMismatch, "expected a reference, got \(value)", entity: entity, object: object, attribute: relationship.name)
        }
    }

    /// Sets a to-one relationship that is stored on the other side (one-to-one): the new target
    /// points here, and whatever pointed here before lets go.
    private func setToOne(_ id: ObjectID, entity: String, _ relationship: Relationship, _ target: ObjectID?) throws {
        guard case .derived(let otherEntity, let other, _)? = projection.storage(entity: entity, relationship: relationship.name)?.1 else { return }
        for previous in localRelated(id, relationship.name) where previous != target {
            try emit(.update(entity: otherEntity, object: previous, fields: [other: .null]))
        }
        if let target, projection.snapshot(target)?[other] != .reference(id) {
            try emit(.update(entity: otherEntity, object: target, fields: [other: .reference(id)]))
            try claimOneToOne(entity: otherEntity, object: target, fields: [other: .reference(id)])
        }
    }

    /// For stored one-to-one fields just set: other objects that claimed the same target let go.
    private func claimOneToOne(entity: String, object: ObjectID, fields: [String: Value]) throws {
        guard let description = schema.entity(entity) else { return }
        for (key, value) in fields {
            guard case .reference(let target) = value, let relationship = description.relationship(key),
                  let inverseName = relationship.inverse,
                  let inverse = schema.entity(relationship.destination)?.relationship(inverseName), !inverse.isToMany
            else { continue }
            for claimant in projection.relatedClaimants(of: target, entity: entity, key: key) where claimant != object {
                try emit(.update(entity: entity, object: claimant, fields: [key: .null]))
            }
        }
    }

    private func removeFromSet(_ id: ObjectID, entity: String, key: String, member: ObjectID) throws {
        guard let record = projection.existing(id), let keyID = projection.nameID(key) else { return }
        let adds = projection.liveAdds(record, key: keyID, target: member)
        guard !adds.isEmpty else { return }
        try emit(.remove(entity: entity, object: id, relationship: key, target: member, adds: adds))
    }

    /// Refuses the delete of `id` when an object it would delete (itself, or one its cascade
    /// rules reach) has a deny relationship holding an object the delete would not remove.
    private func checkDenyRules(deleting id: ObjectID, entity: String) throws {
        var doomed: Set<ObjectID> = [id]
        var pending = [(id, entity)]
        var denials: [(object: ObjectID, entity: String, relationship: String, related: [ObjectID])] = []
        while let (object, entity) = pending.popLast() {
            for relationship in schema.entity(entity)?.relationships ?? [] {
                let related = localRelated(object, relationship.name)
                guard !related.isEmpty else { continue }
                switch relationship.deleteRule {
                case .cascade:
                    for target in related where doomed.insert(target).inserted {
                        pending.append((target, existingEntityName(target) ?? relationship.destination))
                    }
                case .deny:
                    denials.append((object, entity, relationship.name, related))
                case .nullify:
                    break
                }
            }
        }
        // Checked once the whole cascade is known, so the answer does not depend on the order
        // in which relationships or objects are visited.
        for denial in denials {
            let blocking = denial.related.filter { !doomed.contains($0) }
            guard !blocking.isEmpty else { continue }
            throw StoreError(.deleteDenied, "\(blocking.count) related object(s) in \(denial.relationship) deny the delete",
                             entity: denial.entity, object: denial.object, attribute: denial.relationship)
        }
    }

    /// The related objects this zone holds: delete rules and one-to-one claims act within the
    /// zone (in a database, related objects in other zones are left as they are, and their
    /// references to a deleted object read as absent).
    private func localRelated(_ id: ObjectID, _ relationship: String) -> [ObjectID] {
        let related = projection.related(id, relationship: relationship)
        return outside == nil ? related : related.filter { projection.exists($0) }
    }

    private func existingEntityName(_ id: ObjectID) -> String? {
        projection.existing(id).map(projection.entityName(of:))
    }

    /// Writes the delete of `id` and what its delete rules imply (deny rules were checked by
    /// `checkDenyRules(deleting:entity:)`; only objects this delete removes remain behind them).
    private func delete(_ id: ObjectID, entity: String, visited: inout Set<ObjectID>) throws {
        guard visited.insert(id).inserted, projection.exists(id) else { return }
        for relationship in schema.entity(entity)?.relationships ?? [] {
            let related = localRelated(id, relationship.name).filter { !visited.contains($0) }
            guard !related.isEmpty else { continue }
            switch relationship.deleteRule {
            case .deny:
                continue
            case .cascade:
                for target in related {
                    try delete(target, entity: existingEntityName(target) ?? relationship.destination, visited: &visited)
                }
            case .nullify:
                switch projection.storage(entity: entity, relationship: relationship.name)?.1 {
                case .derived(let otherEntity, let other, let storedIsToMany)?:
                    for target in related {
                        if storedIsToMany {
                            try removeFromSet(target, entity: otherEntity, key: other, member: id)
                        } else {
                            try emit(.update(entity: otherEntity, object: target, fields: [other: .null]))
                        }
                    }
                default:
                    break  // stored on the deleted object itself: it goes with it
                }
            }
        }
        try emit(.delete(entity: entity, object: id))
    }
}

/// What an insert of one entity writes, worked out once per transaction: its attributes and the
/// to-one relationships stored on it, in the order of their names (the order of the encoding).
private final class InsertLayout {
    let entity: Entity
    /// The fields' names, sorted.
    let names: [String]
    /// Per attribute, then per relationship (the entity's order): its field's index in `names`,
    /// or -1 (to-many, or stored on the other side).
    let position: [Int]
    /// Whether a to-one relationship is stored here (its one-to-one claims need checking).
    let hasReferenceFields: Bool
    /// The projection's IDs of the entity's name and of `names`, interned at the first insert.
    var interned = false
    var entityID: UInt32 = 0
    var keys: [UInt32] = []

    let entityName: String
    /// The entity's attributes, as flat tables (so that an insert copies no `Attribute`).
    let attributeNames: [String]
    let attributeTypes: [AttributeType]
    let attributeOptional: [Bool]
    /// The default, or null.
    let attributeDefaults: [Value]
    /// The indexes of the to-one relationships in `entity.relationships`.
    let toOne: [Int]

    init(entity: Entity, names: [String], position: [Int], hasReferenceFields: Bool) {
        self.entity = entity
        self.names = names
        self.position = position
        self.hasReferenceFields = hasReferenceFields
        entityName = entity.name
        attributeNames = entity.attributes.map(\.name)
        attributeTypes = entity.attributes.map(\.type)
        attributeOptional = entity.attributes.map(\.isOptional)
        attributeDefaults = entity.attributes.map { $0.defaultValue ?? .null }
        toOne = entity.relationships.indices.filter { !entity.relationships[$0].isToMany }
    }
}

extension Transaction {
    func recordSchema(_ schema: Schema) throws {
        let event = Event(id: EventID(replica: core.replica, sequence: core.nextSequence + UInt64(eventCount)),
                          hlc: try core.clock.tick(), change: .schema(schema))
        try appendRaw(event)
    }
}
