// Journal records of the engine's transitions (format.h, "Journal").
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "engine/addr/fingerprint.h"
#include "engine/addr/ip_address.h"
#include "engine/slots/entry_fields.h"
#include "shm/format.h"

namespace shmipam::engine {

format::JournalRecord make_record(format::JournalOp op, const IpAddress& address,
                                  uint8_t block_prefix, size_t range_set, uint32_t slot_gen,
                                  const Fingerprint& fp, const AttachmentText& text,
                                  const std::array<uint8_t, 16>& boot_id, uint64_t unix_ns);

IpAddress record_address(const format::JournalRecord& r);

// The newest record of every address (highest slot generation, then sequence): what a replay
// keeps. Points into `records`.
using NewestRecords = std::map<std::pair<int, u128>, const format::JournalRecord*>;
NewestRecords newest_records(const std::vector<format::JournalRecord>& records);

// Whether the newest record of `a` is its allocation to the attachment whose fp1 is owner_fp1.
bool journaled_as_allocation(const NewestRecords& newest, const IpAddress& a, uint64_t owner_fp1);

}  // namespace shmipam::engine
