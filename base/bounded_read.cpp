#include "base/bounded_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace shmipam::base {

namespace {

std::string size_text(size_t bytes) {
    constexpr size_t kMiB = size_t(1) << 20;
    if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
    return std::to_string(bytes) + " bytes";
}

}  // namespace

Expected<std::string> read_bounded(const std::string& path, size_t max_bytes) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return make_error(Code::kInvalidConfig, std::strerror(errno));
    std::string out;
    char buf[65536];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int e = errno;
            ::close(fd);
            return make_error(Code::kInvalidConfig, std::strerror(e));
        }
        if (n == 0) break;
        out.append(buf, size_t(n));
        if (out.size() > max_bytes) {
            ::close(fd);
            return make_error(Code::kInvalidConfig, "larger than " + size_text(max_bytes));
        }
    }
    ::close(fd);
    return out;
}

}  // namespace shmipam::base
