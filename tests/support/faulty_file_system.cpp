#include "tests/support/faulty_file_system.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

namespace shmipam::testing {
namespace {

std::string dir_of(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

void FaultyFileSystem::fail(FsCall kind, int nth, int err, bool from_then_on) {
    std::lock_guard lock(mu_);
    rules_.push_back({kind, counts_[kind] + nth, err, from_then_on});
}

void FaultyFileSystem::lose_power_after(int calls) {
    std::lock_guard lock(mu_);
    power_left_ = calls;
}

int FaultyFileSystem::calls(FsCall kind) const {
    std::lock_guard lock(mu_);
    auto it = counts_.find(kind);
    return it == counts_.end() ? 0 : it->second;
}

bool FaultyFileSystem::fails(FsCall kind) {
    std::lock_guard lock(mu_);
    const int n = ++counts_[kind];
    if (power_left_ > 0 && --power_left_ == 0) power_lost_ = true;
    int err = power_lost_ ? EIO : 0;
    for (const Rule& r : rules_) {
        if (err == 0 && r.kind == kind && (n == r.at || (r.from_then_on && n > r.at))) err = r.err;
    }
    if (err == 0) return false;
    ++failures_;
    errno = err;
    return true;
}

std::string FaultyFileSystem::path_of(int fd) {
    std::lock_guard lock(mu_);
    auto it = paths_.find(fd);
    return it == paths_.end() ? std::string() : it->second;
}

void FaultyFileSystem::note_write(const std::string& path, size_t len, off_t off) {
    // What the bytes were before: a power cut before the next sync puts them back.
    UndoWrite u{path, off, std::vector<char>(len, 0)};
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)::pread(fd, u.before.data(), len, off);
        ::close(fd);
    }
    std::lock_guard lock(mu_);
    unsynced_writes_.push_back(std::move(u));
}

void FaultyFileSystem::note_synced(const std::string& path) {
    std::lock_guard lock(mu_);
    std::erase_if(unsynced_writes_, [&](const UndoWrite& u) { return u.path == path; });
    unsynced_content_.erase(path);
}

PowerCutLoss FaultyFileSystem::drop_unsynced() {
    std::lock_guard lock(mu_);
    PowerCutLoss loss;
    // Newest first, so a range written twice ends with its oldest durable bytes.
    for (auto it = unsynced_writes_.rbegin(); it != unsynced_writes_.rend(); ++it) {
        const int fd = ::open(it->path.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0) continue;
        (void)::pwrite(fd, it->before.data(), it->before.size(), it->off);
        ::close(fd);
        ++loss.writes_undone;
    }
    for (const auto& path : unsynced_content_) {
        std::error_code ec;
        const auto size = std::filesystem::file_size(path, ec);
        if (ec || unsynced_names_.count(path)) continue;
        std::filesystem::resize_file(path, 0, ec);
        std::filesystem::resize_file(path, size, ec);
        ++loss.contents_lost;
    }
    for (const auto& path : unsynced_names_) {
        std::error_code ec;
        if (std::filesystem::remove(path, ec)) ++loss.names_lost;
    }
    for (auto it = unsynced_unlinks_.rbegin(); it != unsynced_unlinks_.rend(); ++it) {
        std::error_code ec;
        if (!std::filesystem::exists(it->first, ec) &&
            ::link(it->second.c_str(), it->first.c_str()) == 0) {
            ++loss.unlinks_undone;
        }
    }
    unsynced_writes_.clear();
    unsynced_content_.clear();
    unsynced_names_.clear();
    unsynced_unlinks_.clear();
    return loss;
}

void FaultyFileSystem::restore() {
    std::lock_guard lock(mu_);
    rules_.clear();
    failing_link_names_.clear();
    power_left_ = -1;
    power_lost_ = false;
    unsynced_writes_.clear();
    unsynced_content_.clear();
    unsynced_names_.clear();
    unsynced_unlinks_.clear();
}

int FaultyFileSystem::open(const std::string& path, int flags, mode_t mode) {
    if (fails(FsCall::kOpen)) return -1;
    const bool is_new = (flags & O_CREAT) != 0 && ::access(path.c_str(), F_OK) != 0;
    const int fd = real_.open(path, flags, mode);
    if (fd >= 0) {
        std::lock_guard lock(mu_);
        paths_[fd] = path;
        if (is_new) {
            unsynced_names_.insert(path);
            unsynced_content_.insert(path);
        }
    }
    return fd;
}

int FaultyFileSystem::close(int fd) {
    {
        std::lock_guard lock(mu_);
        paths_.erase(fd);
    }
    return real_.close(fd);  // close never fails here: a failed close leaks the descriptor
}

ssize_t FaultyFileSystem::pwrite(int fd, const void* buf, size_t len, off_t off) {
    if (fails(FsCall::kWrite)) return -1;
    note_write(path_of(fd), len, off);
    return real_.pwrite(fd, buf, len, off);
}

ssize_t FaultyFileSystem::pread(int fd, void* buf, size_t len, off_t off) {
    if (fails(FsCall::kRead)) return -1;
    return real_.pread(fd, buf, len, off);
}

int FaultyFileSystem::allocate(int fd, off_t len) {
    if (fails(FsCall::kAllocate)) return -1;
    return real_.allocate(fd, len);
}

int FaultyFileSystem::fdatasync(int fd) {
    if (fails(FsCall::kSync)) return -1;
    const int rc = real_.fdatasync(fd);
    if (rc == 0) note_synced(path_of(fd));
    return rc;
}

int FaultyFileSystem::fsync(int fd) {
    if (fails(FsCall::kSync)) return -1;
    const int rc = real_.fsync(fd);
    if (rc == 0) note_synced(path_of(fd));
    return rc;
}

int FaultyFileSystem::sync_dir(const std::string& dir) {
    if (fails(FsCall::kSyncDir)) return -1;
    const int rc = real_.sync_dir(dir);
    if (rc == 0) {
        std::lock_guard lock(mu_);
        std::erase_if(unsynced_names_, [&](const std::string& p) { return dir_of(p) == dir; });
        std::erase_if(unsynced_unlinks_, [&](const auto& u) { return dir_of(u.first) == dir; });
    }
    return rc;
}

void FaultyFileSystem::fail_links_to(const std::string& name, int err) {
    std::lock_guard lock(mu_);
    failing_link_names_[name] = err;
}

int FaultyFileSystem::link(const std::string& from, const std::string& to) {
    {
        std::lock_guard lock(mu_);
        const auto it = failing_link_names_.find(to.substr(to.rfind('/') + 1));
        if (it != failing_link_names_.end()) {
            ++failures_;
            errno = it->second;
            return -1;
        }
    }
    if (fails(FsCall::kLink)) return -1;
    const int rc = real_.link(from, to);
    if (rc == 0) {
        std::lock_guard lock(mu_);
        unsynced_names_.insert(to);
        unsynced_content_.insert(to);
    }
    return rc;
}

int FaultyFileSystem::rename(const std::string& from, const std::string& to) {
    if (fails(FsCall::kRename)) return -1;
    return real_.rename(from, to);
}

int FaultyFileSystem::unlink(const std::string& path) {
    if (fails(FsCall::kUnlink)) return -1;
    std::string kept;
    {
        std::lock_guard lock(mu_);
        kept = scratch_ + "/kept." + std::to_string(kept_++);
    }
    const bool saved = ::link(path.c_str(), kept.c_str()) == 0;
    const int rc = real_.unlink(path);
    if (rc == 0 && saved) {
        std::lock_guard lock(mu_);
        if (unsynced_names_.erase(path) == 0) unsynced_unlinks_.push_back({path, kept});
        unsynced_content_.erase(path);
    }
    return rc;
}

int FaultyFileSystem::mkdir(const std::string& path, mode_t mode) {
    if (fails(FsCall::kMkdir)) return -1;
    return real_.mkdir(path, mode);
}

int FaultyFileSystem::write_and_sync_uring(int fd, const void* buf, size_t len, off_t off) {
    if (fails(FsCall::kWrite) || fails(FsCall::kSync)) return -1;
    const int rc = real_.write_and_sync_uring(fd, buf, len, off);
    if (rc == 0) note_synced(path_of(fd));  // written and synced: nothing to undo
    return rc;
}

}  // namespace shmipam::testing
