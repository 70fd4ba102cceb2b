// A shared mapping of one state file, and race-free creation of such files.
//
// Mapping uses Boost.Interprocess file_mapping / mapped_region (plain mmap of a file; no managed
// segments, no interprocess mutexes: those are not robust to SIGKILL). Creation builds the file
// aside, fully allocated (a sparse file on a full filesystem turns a later store into SIGBUS
// rather than an error), initialises it, then publishes it with link(): exactly one of many
// concurrent creators wins and every loser maps the winner's file.
#pragma once

#include <boost/interprocess/file_mapping.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "base/status.h"

namespace shmipam::shm {

enum class Access { kReadOnly, kReadWrite };

class MappedFile {
  public:
    MappedFile() = default;
    // Maps an existing file whole. kIo when it cannot be opened or mapped; the caller validates
    // the contents (size, magic, version, checksum).
    static Expected<MappedFile> open(const std::string& path, Access access);

    std::byte* data() const { return static_cast<std::byte*>(region_.get_address()); }
    size_t size() const { return region_.get_size(); }
    const std::string& path() const { return path_; }
    // Whether the file this maps still has a name: a state directory removed (and perhaps
    // rebuilt), or a retired file unlinked, leaves the mapping valid but of a file nobody will
    // open again. State files have one name, never renamed over, so a link count of zero is the
    // test. One fstat(2) of the descriptor kept open (no path walk: this is on every ADD).
    bool still_at_path() const;
    // The descriptor kept open (its own open file description: the lease table's byte locks
    // are on it); -1 for a file not opened through open().
    int fd() const;

  private:
    boost::interprocess::file_mapping file_;  // keeps the descriptor
    boost::interprocess::mapped_region region_;
    std::string path_;
};

enum class Publish { kCreated, kAlreadyExisted };

// Creates <dir>/<name> of `bytes` bytes unless it exists: builds it aside in <dir>, lets `init`
// fill the zeroed bytes, then links it into place without replacing. `init` returns false to
// abandon (nothing is published then). kIo with the reason when the filesystem refuses.
Expected<Publish> create_published(const std::string& dir, const std::string& name, size_t bytes,
                                   const std::function<Status(std::span<std::byte>)>& init);

// mkdir -p with mode 0755 (0700 would hide state from operators running as another user).
Status make_dirs(const std::string& path);

bool file_exists(const std::string& path);

}  // namespace shmipam::shm
