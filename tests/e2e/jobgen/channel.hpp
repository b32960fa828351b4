// The channels of a job: made (by the common ancestor, or by name by the two
// ends), and one message each way per step, checked byte for byte.
#pragma once

#include "spec.hpp"

namespace jobgen {

// The creator of an inherited channel makes it and places both sides.
void make_inherited(const Channel& c);
// Named channels in three phases that never wait on each other in a
// cycle: listeners, FIFO read ends and UDP sockets first; then connections
// and FIFO write ends (retried until the peer's first phase is done);
// then accepts.
void setup_passive(int me);
void setup_active(int me);
void setup_accept(int me);

// side: 0 = a, 1 = b. The message of a step goes out on the dup on odd steps.
void send_step(const Channel& c, int side, int step);
void recv_step(const Channel& c, int side, int step);

const Side& side_of(const Channel& c, int side);
// The descriptor numbers a member holds for a channel side (rd, wr, dup).
void side_fds(const Channel& c, int side, int out[3]);

}  // namespace jobgen
