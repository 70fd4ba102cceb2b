// Journal records of the engine's transitions (format.h, "Journal").
#pragma once

#include <array>
#include <cstdint>

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

}  // namespace shmipam::engine
