// Where the slots are: the blocks of a network, mapped on demand. The state layer's
// NetworkStore is the real one; the slot scanner and the slot transitions only need this much
// of it.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "engine/addr/ip_address.h"
#include "shm/block_file.h"

namespace shmipam::engine {

// The first address of a block, from its own header.
inline IpAddress block_base_of(const shm::BlockFile& b) {
    const auto g = b.geometry();
    return IpAddress::from_bytes(Family(g.family), g.base);
}

class BlockMap {
  public:
    virtual ~BlockMap() = default;
    // The block holding `a`; nullptr (no error) when it does not exist and `create` is false.
    virtual Expected<shm::BlockFile*> block_holding(const IpAddress& a, bool create) = 0;
    // The prefix length of the network's blocks of family f.
    virtual uint8_t block_prefix(Family f) const = 0;
};

}  // namespace shmipam::engine
