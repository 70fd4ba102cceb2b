#include "base/directory.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace shmipam::base {

int for_each_entry(const std::string& dir, FunctionRef<void(std::string_view name)> visit) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    // Large enough for a directory of a few dozen entries in one call; a larger one takes more.
    alignas(8) char buf[4096];
    int error = 0;
    for (;;) {
        const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n < 0) {
            error = errno;
            break;
        }
        if (n == 0) break;
        for (long at = 0; at < n;) {
            // glibc's dirent64 has the kernel's linux_dirent64 layout.
            unsigned short reclen = 0;
            std::memcpy(&reclen, buf + at + offsetof(dirent64, d_reclen), sizeof reclen);
            const char* name = buf + at + offsetof(dirent64, d_name);
            at += reclen;
            if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) {
                continue;
            }
            visit(std::string_view{name});
        }
    }
    ::close(fd);
    return error;
}

}  // namespace shmipam::base
