extension StoreDiff {
    /// Fills in who pushed each replica named in the findings (sides, replicas, missing events,
    /// blame, timelines). Done after the comparison, which never depends on users: they are a
    /// display aid and may be unknown or unreadable.
    mutating func attribute(_ authors: Authors) {
        guard !authors.users.isEmpty else { return }
        a.user = authors.user(a.replica)
        b.user = authors.user(b.replica)
        for i in replicas.indices { replicas[i].user = authors.user(replicas[i].replica) }
        func attributed(_ missing: MissingEvent) -> MissingEvent {
            var missing = missing
            missing.user = authors.user(missing.replica)
            missing.event?.user = missing.user
            return missing
        }
        firstDivergent = firstDivergent.map(attributed)
        onlyInA = onlyInA.map(attributed)
        onlyInB = onlyInB.map(attributed)
        for i in differingEvents.indices {
            let user = authors.user(differingEvents[i].replica)
            differingEvents[i].user = user
            differingEvents[i].a?.user = user
            differingEvents[i].b?.user = user
        }
        func attributed(_ blame: Blame?) -> Blame? {
            guard var blame else { return nil }
            blame.user = authors.user(blame.replica)
            return blame
        }
        for i in objects.indices {
            objects[i].existenceA = attributed(objects[i].existenceA)
            objects[i].existenceB = attributed(objects[i].existenceB)
            for j in objects[i].fields.indices {
                objects[i].fields[j].blameA = attributed(objects[i].fields[j].blameA)
                objects[i].fields[j].blameB = attributed(objects[i].fields[j].blameB)
            }
        }
        for i in timelineA.indices { timelineA[i].user = authors.user(timelineA[i].replica) }
        for i in timelineB.indices { timelineB[i].user = authors.user(timelineB[i].replica) }
    }

    /// `a1a10000:49 (alice)`: an event with the user who pushed it, when known.
    static func event(_ replica: String, _ sequence: UInt64, _ user: String?) -> String {
        "\(replica.prefix(8)):\(sequence)\(user.map { " (\($0))" } ?? "")"
    }

    /// `a1a10000 (alice)`: a replica with its user, when known.
    static func replica(_ replica: String, _ user: String?) -> String {
        "\(replica.prefix(8))\(user.map { " (\($0))" } ?? "")"
    }
}
