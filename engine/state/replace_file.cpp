#include "engine/state/replace_file.h"

#include <fcntl.h>
#include <unistd.h>

#include "shm/file_system.h"

namespace shmipam::engine {

Status replace_file(const std::string& path, std::string_view bytes, Replace how) {
    shm::FileSystem& fs = shm::file_system();
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    // O_NOFOLLOW: a link planted at the temporary name is not written through.
    const int fd = fs.open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return shm::io_error("cannot create", tmp);
    bool ok = true;
    off_t off = 0;
    while (ok && size_t(off) < bytes.size()) {
        const ssize_t n = fs.pwrite(fd, bytes.data() + off, bytes.size() - size_t(off), off);
        if (n < 0 && errno == EINTR) continue;
        ok = n > 0;
        if (ok) off += n;
    }
    if (ok && how == Replace::kDurable) ok = fs.fsync(fd) == 0;
    int err = errno;
    fs.close(fd);
    if (ok && fs.rename(tmp, path) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        fs.unlink(tmp);
        return shm::io_error("cannot write", path, err);
    }
    if (how == Replace::kDurable) {
        const size_t slash = path.rfind('/');
        const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
        if (fs.sync_dir(dir) != 0) return shm::io_error("cannot sync the directory of", path);
    }
    return Ok{};
}

}  // namespace shmipam::engine
