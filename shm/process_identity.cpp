#include "shm/process_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace shmipam::shm {

ProcStat read_proc_stat(pid_t pid) {
    ProcStat st;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ESRCH) st.lookup = ProcStat::Lookup::kGone;
        return st;
    }
    char buf[1024];
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    const int err = errno;
    ::close(fd);
    if (n <= 0) {
        // A process that exits between open and read reads as ESRCH or empty.
        if (n == 0 || err == ESRCH) st.lookup = ProcStat::Lookup::kGone;
        return st;
    }
    buf[n] = '\0';
    // The command name is in parentheses and may itself hold spaces or parentheses: the fields
    // we want follow the last ')'.
    char* p = std::strrchr(buf, ')');
    if (p == nullptr || p[1] == '\0') return st;
    p += 2;  // ") "
    st.state = *p;
    // After the state (field 3), starttime is field 22: skip 19 more blanks.
    for (int field = 3; field < 22; ++field) {
        p = std::strchr(p, ' ');
        if (p == nullptr) return st;
        ++p;
    }
    st.start_ticks = std::strtoull(p, nullptr, 10);
    st.lookup = ProcStat::Lookup::kFound;
    return st;
}

ProcessIdentity current_process() {
    ProcessIdentity id;
    id.pid = ::getpid();
    id.start_ticks = read_proc_stat(id.pid).start_ticks;
    struct stat sb {};
    if (::stat("/proc/self/ns/pid", &sb) == 0) id.pidns_tag = uint64_t(sb.st_ino);
    return id;
}

}  // namespace shmipam::shm
