// The storage trace, as a file system: the crash tests' plugin (plugin_under_test_main.cpp)
// installs it when SHMIPAM_STORAGE_TRACE names a trace file. Every call goes to the real file
// system; those that change what a power cut could take back are recorded first, so that a test
// can replay a power cut that drops any subset of what was not yet synced (power_cut.h), as
// LevelDB's fault-injection environment does, across many processes.
//
// Trace file (one line per event, appended with O_APPEND so concurrent processes' lines keep the
// order of their system calls):
//   W <path> <offset> <length>   about to write these bytes (logged before the write)
//   S <path>                     fsync/fdatasync of the file returned (logged after)
//   C <path>                     the file appeared under its name (link returned)
//   D <dir>                      fsync of the directory returned
//   U <path> <saved>             about to unlink; a hard link to the file was saved first
//   B <command> <container id>   an invocation began (before it opened the network)
//   A <command> <container id>   it succeeded and is about to print its answer
// A write is durable iff an S of its file follows it; a name (C or U) iff a D of its directory
// follows it.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "shm/file_system.h"

namespace shmipam::testing {

class TracingFileSystem final : public shm::FileSystem {
  public:
    explicit TracingFileSystem(std::string trace_path);
    ~TracingFileSystem() override;

    void began(const std::string& command, const std::string& container_id);
    void answering(const std::string& command, const std::string& container_id);

    int open(const std::string& path, int flags, mode_t mode) override;
    int close(int fd) override;
    ssize_t pwrite(int fd, const void* buf, size_t len, off_t off) override;
    ssize_t pread(int fd, void* buf, size_t len, off_t off) override;
    int allocate(int fd, off_t len) override;
    int fdatasync(int fd) override;
    int fsync(int fd) override;
    int sync_dir(const std::string& dir) override;
    int link(const std::string& from, const std::string& to) override;
    int rename(const std::string& from, const std::string& to) override;
    int unlink(const std::string& path) override;
    int mkdir(const std::string& path, mode_t mode) override;
    int write_and_sync_uring(int fd, const void* buf, size_t len, off_t off) override;

  private:
    void emit(const std::string& line);
    std::string path_of(int fd);

    shm::FileSystem& real_ = shm::real_file_system();
    std::string trace_path_;
    int trace_fd_ = -1;
    uint64_t saved_count_ = 0;
    std::mutex mu_;
    std::map<int, std::string> paths_;  // open descriptors: the trace names files, not fds
};

}  // namespace shmipam::testing
