// CRC32C (Castagnoli), used for header checksums (and journal records later).
#pragma once

#include <cstddef>
#include <cstdint>

namespace shmipam::shm {

uint32_t crc32c(const void* data, size_t len, uint32_t seed = 0);

}  // namespace shmipam::shm
