// A network's index file: header page, lease table, attachment entries (format.h).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "shm/file_identity.h"
#include "shm/format.h"
#include "shm/lease_table.h"
#include "shm/mapped_file.h"

namespace shmipam::shm {

struct IndexGeometry {
    uint64_t entry_count = 1024;  // power of two
    uint8_t block_prefix_v4 = 24;
    uint8_t block_prefix_v6 = 120;
};

class IndexFile {
  public:
    static constexpr const char* kFileName = "index";

    // Maps <dir>/index, creating it if it does not exist. `prefill` runs on the aside copy before
    // it is published (the host-local import), so what it writes is there for every reader from
    // the first moment the index exists.
    using Prefill = std::function<Status(IndexFile&)>;
    static Expected<IndexFile> open_or_create(const std::string& dir, const IndexGeometry& g,
                                              const FileIdentity& who,
                                              const std::array<uint8_t, 16>& boot_id,
                                              const Prefill& prefill);
    // Maps an existing index (tools); `who` may be null to accept any owner.
    static Expected<IndexFile> open_existing(const std::string& path, Access access,
                                             const FileIdentity* who);

    static size_t file_bytes_for(const IndexGeometry& g);
    // The epoch of the index file at `path` now (read from its header, not mapped); nullopt when
    // there is none. Removers compare it with their own before they unlink the name.
    static Expected<std::optional<uint64_t>> epoch_at(const std::string& path);
    // Code 11 for an index that vanished between a look and its mapping: another invocation
    // retired and removed it, and the state is being replaced, not failing.
    static Error being_replaced(const Error& cause);

    format::IndexHeader& header() const { return *header_; }
    format::Entry& entry(uint64_t i) const { return entries_[i]; }
    uint64_t entry_count() const { return entry_count_; }
    LeaseTable& leases() { return leases_; }
    const LeaseTable& leases() const { return leases_; }
    const std::string& path() const { return map_.path(); }
    bool retired() const;
    // Whether the index's name still points to this file: false once the run directory was
    // removed or the name was unlinked and a rebuilt index published (nothing is flagged then).
    bool still_published() const { return map_.still_at_path(); }
    // Marks the index retired (one CAS: true for the one caller that did it). Every operation
    // rechecks the flag; the winner then moves the file aside so the next open rebuilds.
    bool retire();

  private:
    Status bind(std::byte* base, size_t size, const std::string& path, const FileIdentity* who);

    MappedFile map_;
    format::IndexHeader* header_ = nullptr;
    format::Entry* entries_ = nullptr;
    uint64_t entry_count_ = 0;
    LeaseTable leases_{{}, {}};
};

}  // namespace shmipam::shm
