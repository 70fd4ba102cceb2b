// One address block's arena: header page, bitmap, one 64-byte slot per address (format.h).
#pragma once

#include <array>
#include <cstdint>
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
    // Maps <dir>/<name>, creating it (empty: every slot FREE) if it does not exist.
    static Expected<BlockFile> open_or_create(const std::string& dir, const std::string& name,
                                              const BlockGeometry& g, const FileIdentity& who);
    // Maps an existing block file and checks it; geometry comes from its header (tools).
    static Expected<BlockFile> open_existing(const std::string& path, Access access);

    static size_t file_bytes_for(const BlockGeometry& g);

    format::BlockHeader& header() const { return *reinterpret_cast<format::BlockHeader*>(map_.data()); }
    format::Slot& slot(uint64_t i) const { return slots_[i]; }
    uint64_t* bitmap() const { return bitmap_; }
    uint64_t slot_count() const { return slot_count_; }
    BlockGeometry geometry() const;
    const std::string& path() const { return map_.path(); }
    bool retired() const;

private:
    Status check(const BlockGeometry* expected, const FileIdentity* who);

    MappedFile map_;
    format::Slot* slots_ = nullptr;
    uint64_t* bitmap_ = nullptr;
    uint64_t slot_count_ = 0;
};

}  // namespace shmipam::shm
