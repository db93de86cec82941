public import Observation
import StrataCore

/// An observed query's current result as an `@Observable` object, for SwiftUI: a view that reads
/// ``results`` is redrawn when a commit — local, or pulled by sync — changes them.
///
/// ```swift
/// struct NotesList: View {
///     @State var notes: LiveQuery<Note>
///     init(store: Store) { _notes = State(initialValue: LiveQuery(store, sortedBy: [SortKey("title")])) }
///     var body: some View { List(notes.results) { Text($0.title) } }
/// }
/// ```
///
/// Lives on the main actor, as views do; the query runs off it (see ``Store/observe(_:where:sortedBy:limit:)-(M.Type,_,[SortKey],_)``).
@MainActor
@Observable
public final class LiveQuery<Model: StrataModel & Equatable> {
    /// The newest result; empty until the first one arrived (``isLoaded``).
    public private(set) var results: [Model] = []
    /// Whether ``results`` holds a result yet.
    public private(set) var isLoaded = false
    /// Set when a model stopped decoding (the schema changed under it); the results stop updating.
    public private(set) var error: (any Error)?
    @ObservationIgnored private let task: Task<Void, Never>

    /// Starts observing at once; stops when the object is released or the store closes.
    public init(_ store: Store, where predicate: (@Sendable (Model) -> Bool)? = nil, sortedBy sort: [SortKey] = [], limit: Int? = nil) {
        let stream = store.observe(Model.self, where: predicate, sortedBy: sort, limit: limit)
        let box = WeakBox<LiveQuery>()
        task = Task { @MainActor in
            do {
                for try await value in stream {
                    guard let query = box.value else { return }
                    query.results = value
                    query.isLoaded = true
                }
            } catch {
                box.value?.error = error
            }
        }
        box.value = self
    }

    isolated deinit {
        task.cancel()
    }
}

/// A weak reference the observing task holds, so that the query object can be released (and its
/// deinit cancel the task) while the task is still waiting.
@MainActor
private final class WeakBox<T: AnyObject> {
    weak var value: T?
}
