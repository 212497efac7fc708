package router

// SubmitAndWait lets the external tests decide as sluice's server does,
// through Submit, and wait for every result.
var SubmitAndWait = (*Cluster).submitAndWait

// PollFor waits until f holds, failing t if it does not within d.
var PollFor = pollFor
