// The life of one member of a generated job: set up what the spec gives it,
// run its steps in lockstep with its peers, wait at the finish gate, then
// check everything it holds and write its result.
#pragma once

namespace jobgen {

// Runs the job with this process as its root (member 0). Returns the exit
// status: 0 when every member checked its state and finished.
int run_root(const char* ready_file);

}  // namespace jobgen
