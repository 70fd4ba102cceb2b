// One address block's arena: header page, bitmap, one 64-byte slot per address (format.h).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>

#include "shm/file_identity.h"
#include "shm/format.h"
#include "shm/mapped_file.h"

namespace shmipam::shm {

struct BlockGeometry {
    uint8_t family = 4;
    uint8_t prefix = 24;
    std::array<uint8_t, 16> base{};  // big-endian 128-bit
    uint64_t slot_count() const { return uint64_t{1} << ((family == 4 ? 32 : 128) - prefix); }
};

class BlockFile {
  public:
    // Maps <dir>/<name>, creating it (every slot FREE) if it does not exist. `prefill` runs on
    // the aside copy before it is published (the host-local import), never on a shared file.
    using Prefill = std::function<Status(BlockFile&)>;
    static Expected<BlockFile> open_or_create(const std::string& dir, const std::string& name,
                                              const BlockGeometry& g, const FileIdentity& who,
                                              const Prefill& prefill = nullptr);
    // Maps an existing block file and checks it; geometry comes from its header. With `who`, it
    // must belong to that dataDir and network.
    static Expected<BlockFile> open_existing(const std::string& path, Access access,
                                             const FileIdentity* who = nullptr);

    static size_t file_bytes_for(const BlockGeometry& g);

    format::BlockHeader& header() const { return *reinterpret_cast<format::BlockHeader*>(base_); }
    format::Slot& slot(uint64_t i) const { return slots_[i]; }
    uint64_t* bitmap() const { return bitmap_; }
    uint64_t slot_count() const { return slot_count_; }
    BlockGeometry geometry() const;
    const std::string& path() const { return path_; }
    bool retired() const;

  private:
    Status check(const BlockGeometry* expected, const FileIdentity* who);
    Status bind(std::byte* base, size_t size, const std::string& path,
                const BlockGeometry* expected, const FileIdentity* who);

    MappedFile map_;
    std::byte* base_ = nullptr;
    format::Slot* slots_ = nullptr;
    uint64_t* bitmap_ = nullptr;
    uint64_t slot_count_ = 0;
    std::string path_;
};

}  // namespace shmipam::shm
