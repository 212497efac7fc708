package router

// SubmitAndWait lets the external tests decide as sluice's server does,
// through Submit, and wait for every result.
var SubmitAndWait = (*Cluster).submitAndWait
