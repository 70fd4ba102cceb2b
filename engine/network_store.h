// The store the allocator works over: a network's index file and its block arenas, mapped on
// demand (an ADD touches the index and the one or two blocks it claims from).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "engine/ip_address.h"
#include "engine/network_config.h"
#include "shm/block_file.h"
#include "shm/index_file.h"
#include "shm/process_identity.h"

namespace shmipam::engine {

class NetworkStore {
  public:
    // Opens the network's state, creating the directory and index on first use (importing
    // host-local's files if the dataDir has them).
    static Expected<std::unique_ptr<NetworkStore>> open(const NetworkConfig& cfg,
                                                        const shm::ProcessIdentity& self);
    // Opens an existing network's state directory (tools); no config needed.
    static Expected<std::unique_ptr<NetworkStore>> open_existing(const std::string& state_dir,
                                                                 shm::Access access);

    shm::IndexFile& index() { return index_; }
    const shm::ProcessIdentity& self() const { return self_; }
    const std::string& dir() const { return dir_; }
    uint8_t block_prefix(Family f) const;

    // The block holding a; nullptr (no error) when it does not exist and create is false.
    // A block created here runs `prefill` on its aside copy before publishing it.
    Expected<shm::BlockFile*> block_for(const IpAddress& a, bool create,
                                        const shm::BlockFile::Prefill& prefill = nullptr);
    IpAddress block_base(const IpAddress& a) const;
    uint64_t slot_of(const IpAddress& a) const { return uint64_t(a.value - block_base(a).value); }

    // Every block file of the network (tools, verify).
    Expected<std::vector<shm::BlockFile*>> all_blocks();

    static std::string block_file_name(const IpAddress& base, int prefix);

  private:
    NetworkStore() = default;

    std::string dir_;
    shm::FileIdentity who_;
    shm::ProcessIdentity self_;
    shm::IndexFile index_;
    shm::Access access_ = shm::Access::kReadWrite;
    uint8_t prefix_v4_ = 24;
    uint8_t prefix_v6_ = 120;
    std::map<std::pair<int, u128>, std::unique_ptr<shm::BlockFile>> blocks_;
};

}  // namespace shmipam::engine
