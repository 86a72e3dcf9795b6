import PlacedCore

/// A part that writes rows of its own with each selection, in the selection's own transaction, so that a
/// selection the user saw acknowledged always has them too (the fleet export's outbox). The core knows
/// nothing of what the rows are: it lets the journal write inside the transaction and tells it the end.
public protocol SelectionJournal: AnyObject {
    /// Inside the transaction that records `marker` (given with its selection number), after its row:
    /// what the journal writes joins the transaction, and an error it throws rolls the selection back.
    func write(alongside marker: Marker) throws
    /// The transaction is over: committed, or rolled back with whatever `write` wrote.
    func selectionTransactionEnded(committed: Bool)
    /// The selection log, read-only until now, was opened again writable (a new connection).
    func selectionLogReopened()
}
