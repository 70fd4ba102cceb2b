#include "tests/support/tracing_file_system.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace shmipam::testing {

TracingFileSystem::TracingFileSystem(std::string trace_path) : trace_path_(std::move(trace_path)) {
    trace_fd_ = ::open(trace_path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

TracingFileSystem::~TracingFileSystem() {
    if (trace_fd_ >= 0) ::close(trace_fd_);
}

void TracingFileSystem::emit(const std::string& line) {
    if (trace_fd_ < 0) return;
    const int saved_errno = errno;
    const std::string l = line + "\n";
    (void)::write(trace_fd_, l.data(), l.size());  // one write: O_APPEND keeps lines whole
    errno = saved_errno;
}

std::string TracingFileSystem::path_of(int fd) {
    std::lock_guard lock(mu_);
    auto it = paths_.find(fd);
    return it == paths_.end() ? std::string() : it->second;
}

void TracingFileSystem::began(const std::string& command, const std::string& container_id) {
    emit("B " + command + " " + container_id);
}

void TracingFileSystem::answering(const std::string& command, const std::string& container_id) {
    emit("A " + command + " " + container_id);
}

int TracingFileSystem::open(const std::string& path, int flags, mode_t mode) {
    const int fd = real_.open(path, flags, mode);
    if (fd >= 0) {
        std::lock_guard lock(mu_);
        paths_[fd] = path;
    }
    return fd;
}

int TracingFileSystem::close(int fd) {
    {
        std::lock_guard lock(mu_);
        paths_.erase(fd);
    }
    return real_.close(fd);
}

ssize_t TracingFileSystem::pwrite(int fd, const void* buf, size_t len, off_t off) {
    emit("W " + path_of(fd) + " " + std::to_string(off) + " " + std::to_string(len));
    return real_.pwrite(fd, buf, len, off);
}

ssize_t TracingFileSystem::pread(int fd, void* buf, size_t len, off_t off) {
    return real_.pread(fd, buf, len, off);
}

int TracingFileSystem::allocate(int fd, off_t len) {
    return real_.allocate(fd, len);
}

int TracingFileSystem::fdatasync(int fd) {
    const int rc = real_.fdatasync(fd);
    if (rc == 0) emit("S " + path_of(fd));
    return rc;
}

int TracingFileSystem::fsync(int fd) {
    const int rc = real_.fsync(fd);
    if (rc == 0) emit("S " + path_of(fd));
    return rc;
}

int TracingFileSystem::sync_dir(const std::string& dir) {
    const int rc = real_.sync_dir(dir);
    if (rc == 0) emit("D " + dir);
    return rc;
}

int TracingFileSystem::link(const std::string& from, const std::string& to) {
    const int rc = real_.link(from, to);
    if (rc == 0) emit("C " + to);
    return rc;
}

int TracingFileSystem::rename(const std::string& from, const std::string& to) {
    // Nothing the power-cut tests replay renames (only `shmipamctl repair` does).
    return real_.rename(from, to);
}

int TracingFileSystem::unlink(const std::string& path) {
    // Saved under a name no other process uses, so a power cut can bring the file back.
    const std::string saved =
        trace_path_ + ".saved." + std::to_string(::getpid()) + "." + std::to_string(saved_count_++);
    if (::link(path.c_str(), saved.c_str()) == 0) emit("U " + path + " " + saved);
    return real_.unlink(path);
}

int TracingFileSystem::mkdir(const std::string& path, mode_t mode) {
    return real_.mkdir(path, mode);
}

int TracingFileSystem::write_and_sync_uring(int fd, const void* buf, size_t len, off_t off) {
    const std::string path = path_of(fd);
    emit("W " + path + " " + std::to_string(off) + " " + std::to_string(len));
    const int rc = real_.write_and_sync_uring(fd, buf, len, off);
    if (rc == 0) emit("S " + path);
    return rc;
}

}  // namespace shmipam::testing
