#include "shm/process_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace shmipam::shm {

ProcessIdentity current_process() {
    ProcessIdentity id;
    id.pid = ::getpid();
    struct stat sb {};
    if (::stat("/proc/self/ns/pid", &sb) == 0) id.pidns_tag = uint64_t(sb.st_ino);
    return id;
}

}  // namespace shmipam::shm
