/// Where a relationship's truth is kept. Each pair of inverse relationships is stored on one side
/// only and the other side is derived from it, so that no merge can ever leave the two sides
/// disagreeing.
package enum RelationshipStorage: Hashable, Sendable {
    /// A to-one reference stored as a field of this object.
    case field
    /// A to-many relationship stored as an add-wins set on this object.
    case set
    /// Read (and written) through the stored relationship `relationship` of `entity` objects
    /// that point at this object.
    case derived(entity: String, relationship: String, storedIsToMany: Bool)
}

extension Schema {
    /// How `entity.relationship` is stored: a to-one side stores a to-one/to-many pair; of two
    /// sides of the same kind, the one whose "Entity.name" sorts first does.
    package func storage(of relationship: Relationship, in entity: String) -> RelationshipStorage {
        guard let inverseName = relationship.inverse,
              let inverse = self.entity(relationship.destination)?.relationship(inverseName)
        else { return relationship.isToMany ? .set : .field }
        let storedHere: Bool
        if relationship.isToMany != inverse.isToMany {
            storedHere = !relationship.isToMany
        } else {
            storedHere = "\(entity).\(relationship.name)" < "\(relationship.destination).\(inverseName)"
        }
        if storedHere { return relationship.isToMany ? .set : .field }
        return .derived(entity: relationship.destination, relationship: inverseName, storedIsToMany: inverse.isToMany)
    }
}
