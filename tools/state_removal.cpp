#include "tools/state_removal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/directory.h"
#include "base/fault_point.h"
#include "shm/file_system.h"

namespace shmipam::tools {

namespace {

namespace fs = std::filesystem;

constexpr const char* kPoolPrefix = "ippool_";
constexpr const char* kSubnetPrefix = "subnet_";

bool exists(const std::string& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0;
}

// A rename is durable once its directory is synced (through the file-system seam, so that a
// test can fail it).
Status sync_dir(const std::string& dir) {
    if (shm::file_system().sync_dir(dir) != 0) return shm::io_error("cannot sync", dir);
    return Ok{};
}

// Renames dir/state to dir/.removing.state, durably; nothing to do when dir/state is absent.
Status set_aside(const std::string& dir, const std::string& state) {
    const std::string from = dir + "/" + state;
    if (!exists(from)) return Ok{};
    const std::string to = dir + "/" + kRemovingPrefix + state;
    if (::rename(from.c_str(), to.c_str()) != 0) {
        return make_error(Code::kIo,
                          "cannot rename " + from + " to " + to + ": " + std::strerror(errno));
    }
    return sync_dir(dir);
}

Status delete_aside(const std::string& dir, const std::string& state) {
    const std::string path = dir + "/" + kRemovingPrefix + state;
    std::error_code ec;
    fs::remove_all(path, ec);
    if (ec) return make_error(Code::kIo, "cannot delete " + path + ": " + ec.message());
    return Ok{};
}

// The ".removing." directories of dir, by the state name they were.
std::vector<std::string> aside_in(const std::string& dir) {
    std::vector<std::string> out;
    base::for_each_entry(dir, [&](std::string_view name) {
        if (name.starts_with(kRemovingPrefix)) {
            out.emplace_back(name.substr(std::strlen(kRemovingPrefix)));
        }
    });
    return out;
}

}  // namespace

std::vector<std::string> pool_state_names(const PoolStateDirs& dirs) {
    std::vector<std::string> out;
    for (const std::string& dir : {dirs.arenas, dirs.journals}) {
        base::for_each_entry(dir, [&](std::string_view name) {
            if (name.starts_with(kPoolPrefix) || name.starts_with(kSubnetPrefix)) {
                out.emplace_back(name);
            }
        });
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

Expected<std::vector<std::string>> finish_removals(const PoolStateDirs& dirs) {
    std::vector<std::string> finished = aside_in(dirs.journals);
    // A run killed between the two renames: the journal is aside, the arena not yet. Unless a
    // journal by the state's name exists again: the pool was added back and an ADD has used the
    // arena since (the window docs/operations.md names); that state is live, and only the old
    // journal is deleted.
    for (const std::string& state : finished) {
        if (exists(dirs.journals + "/" + state)) continue;
        if (auto st = set_aside(dirs.arenas, state); !st) return st.error();
    }
    for (const std::string& state : aside_in(dirs.arenas)) {
        if (std::find(finished.begin(), finished.end(), state) == finished.end()) {
            finished.push_back(state);
        }
        if (auto st = delete_aside(dirs.arenas, state); !st) return st.error();
    }
    for (const std::string& state : aside_in(dirs.journals)) {
        if (auto st = delete_aside(dirs.journals, state); !st) return st.error();
    }
    std::sort(finished.begin(), finished.end());
    return finished;
}

Status remove_pool_state(const PoolStateDirs& dirs, const std::string& state) {
    // A leftover of an earlier removal of the same name would be in the way of the renames.
    if (auto done = finish_removals(dirs); !done) return done.error();
    // The journal first: from this rename on the state is removed (no rebuild can read it, no
    // invocation lists it); everything after only finishes the removal.
    if (auto st = set_aside(dirs.journals, state); !st) return st.error();
    SHMIPAM_FAULT("states.after_journal_aside");
    if (auto st = set_aside(dirs.arenas, state); !st) return st.error();
    SHMIPAM_FAULT("states.after_arena_aside");
    if (auto st = delete_aside(dirs.arenas, state); !st) return st.error();
    SHMIPAM_FAULT("states.after_arena_deleted");
    return delete_aside(dirs.journals, state);
}

}  // namespace shmipam::tools
