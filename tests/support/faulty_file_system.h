// A file system for in-process tests that fails chosen calls and can forget what was not synced,
// as LevelDB's FaultInjectionTestEnv: install it (shm::install_file_system), run engine
// operations, then
//   - fail(kind, nth, errno): the nth call of that kind from now fails with that error (EIO,
//     ENOSPC, EROFS...), once or from then on;
//   - lose_power_after(n): the nth call from now, and every one after it, fails with EIO (the
//     disk went away mid-operation: the operation fails, as a process killed there never
//     answers);
//   - drop_unsynced(): what a power cut takes: every write no later sync of its file covers is
//     undone (its bytes restored), every file that appeared since its directory was last synced
//     is gone, one whose blocks were never synced is all zero, and every unlink its directory
//     did not sync is undone. Renames are not taken back (nothing durable is renamed).
// Every call goes to the real file system unless it fails here.
#pragma once

#include <cerrno>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "shm/file_system.h"

namespace shmipam::testing {

enum class FsCall {
    kOpen,
    kWrite,
    kRead,
    kAllocate,
    kSync,
    kSyncDir,
    kLink,
    kRename,
    kUnlink,
    kMkdir
};
// kSync counts fdatasync, fsync and the io_uring commit; kWrite counts pwrite and the commit.

struct PowerCutLoss {
    size_t writes_undone = 0, names_lost = 0, contents_lost = 0, unlinks_undone = 0;
};

class FaultyFileSystem final : public shm::FileSystem {
  public:
    // `scratch`: a directory where unlinked files are kept until their unlink is durable.
    explicit FaultyFileSystem(std::string scratch) : scratch_(std::move(scratch)) {}

    void fail(FsCall kind, int nth, int err, bool from_then_on = false);
    // Every link(2) to a file named `name` (in any directory) fails with `err` (other files'
    // links go on: a journal checkpoint is published by link too).
    void fail_links_to(const std::string& name, int err);
    void lose_power_after(int calls);
    bool power_lost() const { return power_lost_; }
    int calls(FsCall kind) const;
    int failures() const { return failures_; }
    PowerCutLoss drop_unsynced();
    // Back to a working disk with nothing pending (after drop_unsynced, or to start over).
    void restore();

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
    struct Rule {
        FsCall kind;
        int at;  // the call number (of that kind) that fails
        int err;
        bool from_then_on;
    };
    std::map<std::string, int> failing_link_names_;
    struct UndoWrite {
        std::string path;
        off_t off;
        std::vector<char> before;
    };
    // True when this call fails (errno set); counts it either way.
    bool fails(FsCall kind);
    void note_write(const std::string& path, size_t len, off_t off);
    void note_synced(const std::string& path);
    std::string path_of(int fd);

    shm::FileSystem& real_ = shm::real_file_system();
    std::string scratch_;
    mutable std::mutex mu_;
    std::map<FsCall, int> counts_;
    std::vector<Rule> rules_;
    int power_left_ = -1;  // calls until the power goes; -1: never
    bool power_lost_ = false;
    int failures_ = 0;
    std::map<int, std::string> paths_;
    std::vector<UndoWrite> unsynced_writes_;
    std::set<std::string> unsynced_names_;    // appeared; their directory not synced since
    std::set<std::string> unsynced_content_;  // appeared; their blocks never synced
    std::vector<std::pair<std::string, std::string>> unsynced_unlinks_;  // path, kept copy
    int kept_ = 0;
};

// The faulty file system, installed for the test's lifetime.
struct InstalledFaultyFs {
    explicit InstalledFaultyFs(const std::string& scratch) : fs(scratch) {
        std::filesystem::create_directories(scratch);
        shm::install_file_system(&fs);
    }
    ~InstalledFaultyFs() { shm::install_file_system(nullptr); }
    FaultyFileSystem fs;
};

}  // namespace shmipam::testing
