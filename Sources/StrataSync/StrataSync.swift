// The client sync engine (issue 4): pushes a store's unpushed local transactions to a log
// server and pulls the zone's changes, over the protocol in StrataServer's SyncProtocol article.
