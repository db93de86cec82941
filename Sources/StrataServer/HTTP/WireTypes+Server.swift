public import StrataProtocol

extension ZoneDescription {
    /// The description of `zone` with the change token of its end.
    public init(_ zone: ZoneInfo, token: ChangeToken, canPush: Bool? = nil, limits: ServerLimits? = nil) {
        self.init(name: zone.name, owner: zone.owner, access: zone.access, grants: zone.grants, epoch: zone.epoch,
                  token: token.description, canPush: canPush, limits: limits, continues: zone.lineage,
                  participants: zone.participants, minSchemaVersion: zone.minSchemaVersion > 1 ? zone.minSchemaVersion : nil)
    }
}

extension ServerLimits {
    /// What a server configured with `limits` advertises.
    public init(_ limits: ServerConfiguration.Limits) {
        self.init(maxBodyBytes: limits.maxBodyBytes, maxStateBytes: limits.maxStateBytes, maxPullLimit: limits.maxPullLimit,
                  maxClockOffsetMilliseconds: UInt64(max(0, limits.maxClockOffset / .milliseconds(1))), maxAssetBytes: limits.maxAssetBytes)
    }
}
