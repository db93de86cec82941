extension RandomAccessCollection {
    /// The index of the first element for which `isAbove` holds, in a collection sorted so that
    /// it fails for a prefix and holds for the rest (a binary search; `endIndex` when it never
    /// holds). What the digests' prefix sums and range lookups are found by.
    package func partitionIndex(where isAbove: (Element) -> Bool) -> Index {
        var low = startIndex
        var count = self.count
        while count > 0 {
            let half = count / 2
            let mid = index(low, offsetBy: half)
            if isAbove(self[mid]) {
                count = half
            } else {
                low = index(after: mid)
                count -= half + 1
            }
        }
        return low
    }
}
