// Who a process is, as the lease table labels its holders: pid and pid-namespace tag. Labels
// only: whether a holder lives is told by its lease's byte lock (shm/lease_table.h), which the
// kernel drops when it dies, whatever its pid or namespace.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace shmipam::shm {

struct ProcessIdentity {
    pid_t pid = 0;
    uint64_t start_ticks = 0;  // unused since liveness is kernel-held: 0 in every lease word
    uint64_t pidns_tag = 0;    // inode of /proc/self/ns/pid
};

// The calling process (one stat of /proc/self/ns/pid); callers keep the result.
ProcessIdentity current_process();

}  // namespace shmipam::shm
