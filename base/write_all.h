// Writes a whole buffer to a descriptor, across short writes and EINTR.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <string_view>

namespace shmipam {

// True when every byte was written; false at the first error (errno says which).
inline bool write_all(int fd, std::string_view bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        off += size_t(n);
    }
    return true;
}

}  // namespace shmipam
