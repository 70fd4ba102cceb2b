// Who a process is, in terms another process can check later: pid, start time (so a reused pid
// is not mistaken for the original holder) and pid-namespace tag (pids of another namespace are
// meaningless here).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace shmipam::shm {

struct ProcessIdentity {
    pid_t pid = 0;
    uint64_t start_ticks = 0;  // field 22 of /proc/<pid>/stat
    uint64_t pidns_tag = 0;    // inode of /proc/self/ns/pid
};

// The calling process. Reads /proc once per call; callers keep the result.
ProcessIdentity current_process();

struct ProcStat {
    enum class Lookup { kFound, kGone, kUnknown } lookup = Lookup::kUnknown;
    char state = '?';
    uint64_t start_ticks = 0;
};
// /proc/<pid>/stat of another process. kGone only when the kernel says no such process;
// kUnknown for anything else (out of descriptors, hidepid, ...): callers must not take that as
// death.
ProcStat read_proc_stat(pid_t pid);

}  // namespace shmipam::shm
