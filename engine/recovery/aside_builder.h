// Building a network's state aside, before its index is published: used by the host-local
// import and by the rebuild from the journal. Nothing here touches a shared file: entries go
// into the unpublished index, slots into blocks built aside and published with link().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/addr/fingerprint.h"
#include "engine/addr/ip_address.h"
#include "engine/slots/entry_fields.h"
#include "engine/state/index_filler.h"
#include "shm/block_file.h"
#include "shm/index_file.h"

namespace shmipam::engine {

class AsideBuilder {
  public:
    AsideBuilder(shm::IndexFile& aside, size_t range_sets)
        : aside_(aside), range_sets_(range_sets) {}

    // A committed attachment entry (first tenancy) at its hash position. kIndexFull when full.
    // claim_binding: a claim entry's binding word (format.h, ClaimFields), else unused.
    Expected<uint64_t> add_entry(const Fingerprint& fp, const AttachmentText& text,
                                 uint64_t claim_binding = 0, bool claim_of_earlier_boot = false);
    // Names `address` as the entry's address in `range_set` and allocates its slot to it.
    void add_address(uint64_t entry, size_t range_set, const IpAddress& address,
                     uint8_t block_prefix, uint32_t min_gen, uint64_t owner_fp,
                     uint64_t allocated_unix_ns);
    // A slot that is not allocated but must start at a generation (and maybe cool down).
    void set_slot(const IpAddress& address, uint8_t block_prefix, uint32_t min_gen, bool cooling,
                  uint64_t released_boot_ns);

    // Creates every block that holds a slot set above, with those slots filled.
    Status build_blocks(const BlockOpener& open_block);

  private:
    struct SlotFill {
        uint64_t slot = 0;
        uint64_t word = 0;
        uint64_t owner = 0;
        uint64_t owner_fp = 0;
        uint64_t allocated_unix_ns = 0;
        uint64_t changed_boot_ns = 0;
    };
    SlotFill& fill_for(const IpAddress& address, uint8_t block_prefix);

    shm::IndexFile& aside_;
    size_t range_sets_;
    std::map<std::pair<int, u128>, std::pair<IpAddress, std::map<uint64_t, SlotFill>>> blocks_;
};

}  // namespace shmipam::engine
